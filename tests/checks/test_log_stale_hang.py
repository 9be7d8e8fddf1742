"""`log_stale` and the hangs trainguard finds from inside: a `hung` heartbeat names the
rank that stopped first, where the others are stuck and the report; the hang log reports
a hang after the requeue (restart step, hangs in 24 h); `hung_action` ends a job that
stays hung past `hung_grace`, once, and only when configured with a job to act on."""
from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.checks.conftest import Jobs, tick, write_config
from tests.helpers import job_state, sh, wait_for
from trainguard.hangs.record import HangEvent, append_event
from trainguard.heartbeat import write_heartbeat
from watchdogs.errors import ConfigError
from watchdogs.result import Status
from watchdogs.state.store import StateStore


def hang_check(**opts: str) -> str:
    keys = "\n".join(f"{k} = {json.dumps(v)}" for k, v in opts.items())
    return f'[[check]]\nname = "hung"\ntype = "log_stale"\n{keys}\n'


def event(when: float, restart: int, rank: int = 0, **kw: object) -> HangEvent:
    values: dict[str, object] = dict(
        time=when, job_id="77", restart=restart, rank=rank, host=f"node{rank + 1}", step=41200,
        phase="train", stalled_for=310.0, frames=("all_reduce (distributed_c10d.py:2806)",
                                                  "train_step (trainer.py:212)"),
        report=f"/runs/hb/hang-77-restart{restart}-rank{rank}.txt", checkpoint=41000, hangs=restart + 1,
        first_to_stop="rank 3 (node7) at step 41199: train, last heartbeat 400 s ago",
        action="exiting 140 (requeue) in 5 s")
    values.update(kw)
    return HangEvent(**values)  # type: ignore[arg-type]  # a test's table of typed values


def test_a_hung_heartbeat_names_the_first_rank_to_stop_where_the_others_are_stuck_and_the_report(
        tmp_path: Path, store: StateStore) -> None:
    beats = tmp_path / "hb"
    beats.mkdir()
    now = time.time()
    write_heartbeat(beats, 0, 41200, "hung", now=now - 3, job_id="77", stalled_for=300.0,
                    frames=("all_reduce (distributed_c10d.py:2806)", "train_step (trainer.py:212)"),
                    report="/runs/hb/hang-77-restart0-rank0.txt")
    write_heartbeat(beats, 3, 41199, "train", now=now - 400, job_id="77")
    config = write_config(tmp_path, hang_check(heartbeats="hb", max_age="1h"))
    result = tick(config, store, now=datetime.fromtimestamp(now).astimezone())[0]["hung"]
    assert result.status is Status.CRITICAL
    assert result.summary.startswith("training hung at step 41199; first to stop: rank 3 (")
    assert "at step 41199: train, last heartbeat 6 min 40 s ago" in result.summary
    assert "stuck in all_reduce (distributed_c10d.py:2806) <- train_step (trainer.py:212) for 5 min 00 s" \
        in result.summary
    assert "report /runs/hb/hang-77-restart0-rank0.txt" in result.summary


def test_a_logged_hang_is_reported_after_the_requeue_with_the_restart_step_and_the_count(
        tmp_path: Path, store: StateStore) -> None:
    beats = tmp_path / "hb"
    beats.mkdir()
    now = time.time()
    # The requeued run trains again; its heartbeats are fresh, the hang log remembers.
    write_heartbeat(beats, 0, 41010, "train", now=now - 2, job_id="77")
    append_event(beats, event(now - 5 * 3600, restart=0))
    append_event(beats, event(now - 120, restart=1))
    append_event(beats, event(now - 119, restart=1, rank=1, frames=("barrier (distributed_c10d.py:4100)",)))
    config = write_config(tmp_path, hang_check(heartbeats="hb", max_age="30m"))
    result = tick(config, store)[0]["hung"]
    assert result.status is Status.CRITICAL
    assert result.summary.startswith("training hung at step 41200 (job 77, restart 1); first to stop: "
                                     "rank 3 (node7) at step 41199")
    assert "rank 0 (node1) stuck in all_reduce (distributed_c10d.py:2806)" in result.summary
    assert "rank 1 (node2) stuck in barrier (distributed_c10d.py:4100)" in result.summary
    assert "restarts from step 41000; 2nd hang in 24 h" in result.summary
    # Once the hang is older than max_age, the heartbeats alone decide again.
    later = tick(config, store, now=datetime.fromtimestamp(now + 3600).astimezone())[0]["hung"]
    assert "training hung" not in later.summary


def test_hung_action_needs_heartbeats_and_a_job_to_act_on(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        write_config(tmp_path, hang_check(heartbeats="hb", hung_action="requeue"))
    assert "hung_action" in str(info.value) and "'requeue'" in str(info.value)
    with pytest.raises(ConfigError) as bad:
        write_config(tmp_path, hang_check(heartbeats="hb", hung_action="kill"))
    assert "one of 'none', 'signal', 'requeue'" in str(bad.value)


@pytest.mark.slurm
@pytest.mark.timeout(90)
def test_hung_action_requeues_a_job_still_hung_after_the_grace(tmp_path: Path, store: StateStore,
                                                                   jobs: Jobs) -> None:
    name = f"wd-hang-{tmp_path.name[-8:]}"
    job = jobs.submit("--requeue", name=name)
    wait_for(lambda: job_state(job) == "RUNNING", what="job running")
    beats = tmp_path / "hb"
    beats.mkdir()
    write_heartbeat(beats, 0, 120, "hung", job_id=job, stalled_for=40.0, frames=("read (x.py:1)",))
    write_heartbeat(beats, 1, 118, "train", now=time.time() - 60, job_id=job)
    config = write_config(tmp_path, f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n'
                          + hang_check(heartbeats="hb", job="train", hung_action="requeue", hung_grace="2s"))
    first = tick(config, store)[0]["hung"]
    assert first.status is Status.CRITICAL and "requeued" not in first.summary   # within the grace
    # The grace is measured from the hung record's time to the tick's time.
    acted = tick(config, store, now=datetime.fromtimestamp(time.time() + 3).astimezone())[0]["hung"]
    assert re.search(rf"still running after \d s: requeued job {job}$", acted.summary), acted.summary
    wait_for(lambda: sh("scontrol", "show", "job", "-o", job).count("Restarts=1") == 1, 30, 0.25,
             "job requeued")
    assert job_state(job) in ("PENDING", "REQUEUED", "COMPLETING")
