"""Which run of a job wrote a heartbeat: its restart count (requeues) and in-place restart,
so whatever explains an ending reads that run's records only (a stale `hung` from before a
requeue does not make a later exit 1 a hang)."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainguard.heartbeat import (
    FINISHED,
    RunEnd,
    of_run,
    read_heartbeats,
    run_end,
    write_heartbeat,
)


def test_a_heartbeat_says_which_run_of_the_job_wrote_it(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "88")
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    monkeypatch.delenv("TRAINGUARD_INPLACE_RESTART", raising=False)
    first = write_heartbeat(tmp_path, 0, 5, "train")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    monkeypatch.setenv("TRAINGUARD_INPLACE_RESTART", "1")
    later = write_heartbeat(tmp_path, 1, 9, "train")
    assert (first.restart, first.inplace, later.restart, later.inplace) == (0, 0, 2, 1)
    assert [(b.rank, b.restart, b.inplace) for b in read_heartbeats(tmp_path)] == [(0, 0, 0), (1, 2, 1)]


def test_a_stale_hung_record_from_before_a_requeue_is_not_this_runs(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "88")
    monkeypatch.delenv("TRAINGUARD_INPLACE_RESTART", raising=False)
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    write_heartbeat(tmp_path, 1, 40, "hung", now=100.0)       # run 0: rank 1 hung
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    write_heartbeat(tmp_path, 0, 41, "train", now=200.0)      # run 1: rank 0 alone, then exit 1
    beats = read_heartbeats(tmp_path)
    assert [b.phase for b in of_run(beats, "88", restart=1, inplace=0)] == ["train"]
    assert [b.phase for b in of_run(beats, "88", started=190.0)] == ["train"]
    assert sorted(b.phase for b in of_run(beats, "88")) == ["hung", "train"]   # no run named: all
    assert of_run(beats, "89", restart=1) == []


def test_the_end_of_a_run_is_told_from_its_own_records(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "88")
    monkeypatch.delenv("TRAINGUARD_INPLACE_RESTART", raising=False)
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    write_heartbeat(tmp_path, 1, 12, "stopping", now=100.0)   # run 0 stopped (its rank 1)
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    write_heartbeat(tmp_path, 0, 30, "done", now=200.0)       # run 1 finished on one rank
    beats = read_heartbeats(tmp_path)
    assert run_end(beats, "88") == RunEnd(FINISHED, 30)
    assert run_end(beats, "88", started=190.0) == RunEnd(FINISHED, 30)


def test_records_of_an_older_trainguard_still_count(tmp_path: Path) -> None:
    (tmp_path / "rank-0.json").write_text('{"rank": 0, "step": 3, "phase": "done", "time": 5, '
                                          '"job_id": "88"}')
    beats = read_heartbeats(tmp_path)
    assert beats[0].restart == -1 and of_run(beats, "88", restart=2, inplace=0) == beats
    assert run_end(beats, "88") == RunEnd(FINISHED, 3)
