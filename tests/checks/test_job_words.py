"""The words of a finished job's alert, from what the run left on disk: how trainguard says a
run ended (its heartbeats, its exit file beside them) and what the log tail leaves out.
The cluster scenarios that deliver these words are in test_job_words_cluster.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from notifiers.wording import log_path, next_step
from trainguard.causes import Cause
from trainguard.heartbeat import (
    FINISHED,
    STOPPED,
    RunEnd,
    exit_file_beside,
    read_heartbeats,
    run_end,
    write_heartbeat,
)
from trainguard.stopping.exits import write_exit_file
from watchdogs.checks.jobfiles import LogTail, progress, tail_logs

REPO = Path(__file__).resolve().parents[2]


def run_folder(tmp_path: Path, phases: list[str], step: int = 12, job: str = "7") -> Path:
    beats = tmp_path / "run" / "heartbeat"
    beats.mkdir(parents=True)
    for rank, phase in enumerate(phases):
        write_heartbeat(beats, rank, step, phase, now=1.0, job_id=job)
    return beats


def test_a_kill_switch_stop_is_told_from_its_exit_file_and_a_finish_from_done(tmp_path: Path) -> None:
    beats = run_folder(tmp_path, ["stopping", "stopping"])
    write_exit_file(exit_file_beside(beats, "7"), 0, "kill_switch after step 12; checkpoint saved at step 12")
    text = exit_file_beside(beats, "7").read_text()
    assert run_end(read_heartbeats(beats), "7", text) == RunEnd(STOPPED, 12, Cause.KILL_SWITCH, 0)
    assert run_end(read_heartbeats(beats), "7", None) == RunEnd(STOPPED, 12, None, None)
    done = run_folder(tmp_path / "b", ["done", "done"], step=29)
    assert run_end(read_heartbeats(done), "7") == RunEnd(FINISHED, 29)
    # The kill switch already there at start-up: "done", and an exit file with the code alone.
    assert run_end(read_heartbeats(done), "7", "0\n") == RunEnd(STOPPED, 29, None, 0)


@pytest.mark.parametrize(("phases", "job"), [(["train", "train"], "7"), (["done", "train"], "7"),
                                             (["done"], "8")])
def test_a_run_killed_from_outside_or_another_jobs_records_say_nothing(
        tmp_path: Path, phases: list[str], job: str) -> None:
    beats = run_folder(tmp_path, phases, job=job)
    assert run_end(read_heartbeats(beats), "7") is None


def test_the_watchdog_reads_who_stopped_the_run_through_its_bounded_probe(tmp_path: Path) -> None:
    beats = run_folder(tmp_path, ["stopping"])
    write_exit_file(exit_file_beside(beats, "7"), 0, "kill_switch after step 12; checkpoint saved at step 12")
    assert progress(beats, None, "7", 10.0).stopped_by == "the kill switch"
    exit_file_beside(beats, "7").unlink()
    assert progress(beats, None, "7", 10.0).stopped_by == "trainguard"
    finished = run_folder(tmp_path / "b", ["done"])
    assert progress(finished, None, "7", 10.0).stopped_by is None


def test_the_templates_keep_the_exit_file_beside_the_heartbeat_folder() -> None:
    """The watchdog finds the exit file where the batch templates put it (EXIT_FILE_BESIDE)."""
    for template in sorted((REPO / "slurm").glob("train-*.slurm")):
        text = template.read_text()
        if "TRAINGUARD_EXIT_FILE=" not in text:
            continue
        assert "TRAINGUARD_EXIT_FILE=$RUN_DIR/exit-code.$SLURM_JOB_ID" in text, template
        assert "TRAINGUARD_HEARTBEAT_DIR=${TRAINGUARD_HEARTBEAT_DIR:-$RUN_DIR/heartbeat}" in text, template


def test_the_log_tail_says_how_many_older_lines_it_leaves_out(tmp_path: Path) -> None:
    log = tmp_path / "train-9.out"
    log.write_text("".join(f"line {i}\n" for i in range(1, 62)))
    found = tail_logs([log], 20, 10.0)
    assert isinstance(found, LogTail)
    assert found.lines[-1] == "line 61" and found.older == "41 older lines not shown"
    log.write_text("x" * 100 + "\n" + "".join(f"line {i}\n" for i in range(1, 5000)))
    big = tail_logs([log], 20, 10.0)
    assert big is not None and big.older.startswith("older lines not shown: the log is ")
    log.write_text("only\n")
    assert tail_logs([log], 20, 10.0) == LogTail(str(log), ("only",))


def test_next_names_the_log_quoted_and_without_the_note_about_what_was_cut() -> None:
    details = ["no job is running.", "last lines of /scratch/a (b)/train-9.out (41 older lines not shown):",
               "line 61"]
    assert log_path(details) == "/scratch/a (b)/train-9.out"
    event = type("E", (), {"runbook": "", "details": details, "context": {}})()
    # Quoted, so that the command pasted into a shell reads the file.
    assert next_step(event, "login1") == "tail -n 50 '/scratch/a (b)/train-9.out'   (on login1)"
