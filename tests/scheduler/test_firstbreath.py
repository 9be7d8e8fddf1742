"""What `watchdogs start` says of its first instance (watchdogs.scheduler.firstbreath), from
recorded looks at the queue and the state: no Slurm needed. The job's log is read without
ever blocking on a FIFO. The same verdicts on the real cluster: tests/selfwatch/
test_start_first_breath.py."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from watchdogs.scheduler import firstbreath as fb
from watchdogs.scheduler.chain import ChainSettings

LINE_127 = ("/var/spool/slurmd/job00042/slurm_script: line 45: /home/u/sw/.venv/bin/python: "
            "No such file or directory")


def running(node: str = "node1") -> fb.Queued:
    return fb.Queued("RUNNING", "None", "2026-11-28T14:02:09", node)


def pending(reason: str) -> fb.Queued:
    return fb.Queued("PENDING", reason, "N/A", "")


def test_a_live_tick_is_lived_with_the_node_and_the_time_of_the_tick() -> None:
    tick = fb.Tick(7, "node1", 1_700_000_000.0, None, None)
    verdict = fb.judge("42", fb.Look(running(), tick), out_of_time=False)
    assert verdict is not None and verdict.exit_code == fb.LIVED == 0
    assert verdict.lines[0].startswith("instance 7 (job 42) is running on node1 and ticked at 2023-11-14 ")


def test_the_node_is_slurms_and_the_host_is_named_when_they_differ() -> None:
    verdict = fb.judge("42", fb.Look(running("node2"), fb.Tick(7, "vm", 1.0, None, None)), out_of_time=False)
    assert verdict is not None and "is running on node2 (host vm) and ticked" in verdict.lines[0]


def test_pending_is_looked_at_again_until_the_wait_ends_then_said_with_the_reason_and_what_helps() -> None:
    look = fb.Look(pending("Resources"), None)
    assert fb.judge("42", look, out_of_time=False) is None
    verdict = fb.judge("42", look, out_of_time=True)
    assert verdict is not None and verdict.exit_code == fb.PENDING == 1 and verdict.verdict == "pending"
    assert verdict.lines[0] == "job 42 is still pending (Resources)"
    helps = verdict.lines[1]
    assert helps.startswith("what helps: the cluster is busy") and "SBATCH_PARTITION" in helps


def test_running_but_not_ticked_when_the_wait_ends_is_not_called_lived() -> None:
    verdict = fb.judge("42", fb.Look(running(), None), out_of_time=True)
    assert verdict is not None and verdict.verdict == "starting" and verdict.exit_code == 1


def test_slurm_not_answering_to_the_end_is_unknown_not_failed() -> None:
    look = fb.Look(None, None, "squeue did not answer within 15s")
    assert fb.judge("42", look, out_of_time=False) is None
    verdict = fb.judge("42", look, out_of_time=True)
    assert verdict is not None and verdict.exit_code == fb.UNKNOWN == 3
    assert "squeue did not answer" in verdict.lines[0]


@pytest.mark.parametrize(("reason", "words"), [
    ("JobHeldUser", "`scontrol release 42`"),
    ("Priority", "the cluster is busy"),
    ("PartitionDown", "SBATCH_PARTITION"),
    ("ReqNodeNotAvail, UnavailableNodes:node3", "SBATCH_PARTITION"),
    ("QOSMaxJobsPerUserLimit", "SBATCH_QOS"),
    ("SomethingNew", "`scontrol show job 42`"),
])
def test_each_pending_reason_gets_what_helps(reason: str, words: str) -> None:
    assert words in fb.pending_fix("42", reason)


def test_a_job_dead_of_a_missing_python_names_the_path_and_the_shared_venv_fix(tmp_path: Path) -> None:
    ending = fb.Ending("FAILED", "127:0", LINE_127, tmp_path / "watchdogs-cron-42.out")
    verdict = fb.failed("42", None, ending, "/home/u/sw/.venv/bin/python")
    assert verdict.exit_code == fb.FAILED == 2
    assert verdict.lines[0] == ("job 42 failed at start: it ended before its first tick "
                                "(state FAILED, exit code 127:0)")
    assert verdict.lines[1].endswith(f"last line: {LINE_127}")
    assert verdict.lines[2] == ("fix: the compute node has no /home/u/sw/.venv/bin/python: install the venv "
                                "on a path the compute nodes share (or load the module that provides its "
                                "Python), then `watchdogs start` again")


@pytest.mark.parametrize(("line", "code", "words"), [
    ("/usr/bin/python3: No module named watchdogs", "1:0", "has no slurm-watchdogs installed"),
    ("", "127:0", "the compute node has no /sw/py"),
    ("exec: /sw/py: Permission denied", "126:0", "may not run /sw/py"),
    ("ERROR watchdogs: config error (1 problem)", "1:0", "`watchdogs validate`"),
    ("", "0:9", "raise #SBATCH --mem"),
    ("something else", "1:0", "read the whole log"),
])
def test_the_fix_follows_the_last_line(line: str, code: str, words: str, tmp_path: Path) -> None:
    assert words in fb.diagnose(line, code, "/sw/py", tmp_path / "x.out")


def test_an_instance_that_ended_at_once_is_failed_with_its_recorded_reason(tmp_path: Path) -> None:
    tick = fb.Tick(3, "node1", 10.0, 11.0, "config error (1 problem)")
    verdict = fb.failed("42", tick, fb.Ending("COMPLETED", "1:0", None, tmp_path / "x.out"), None)
    assert "its instance 3 on node1 ended: config error (1 problem)" in verdict.lines[0]
    assert "no line (empty or unreadable)" in verdict.lines[1]


def test_the_last_line_is_the_last_non_blank_one_on_one_line(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"starting\n" + b"x" * 9000 + b"\nthe \x1b[31mend\r\n\n  \n")
    assert fb.last_line(log) == "the \\x1b[31mend"


def test_a_fifo_or_a_link_at_the_log_is_named_never_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "job.out"
    os.mkfifo(fifo)
    got: list[str | None] = []
    reader = threading.Thread(target=lambda: got.append(fb.last_line(fifo)), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading the log blocked on a FIFO"
    assert got == [f"({fifo} is a FIFO (named pipe), not a regular file)"]
    link = tmp_path / "link.out"
    link.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text("not followed\n")
    assert fb.last_line(link) == f"({link} is a symbolic link, not a regular file)"
    assert fb.last_line(tmp_path / "never-written.out") is None


class Recorded(fb.Looker):
    """The looks of a job in order (the last repeats), and its ending: recorded, no Slurm."""

    def __init__(self, tmp: Path, looks: list[fb.Look], late_tick: fb.Tick | None = None) -> None:
        super().__init__(ChainSettings(tmp / "w.toml", tmp, tmp / "STOP", "watchdogs-cron"))
        self.looks = looks
        self.late_tick = late_tick
        self.endings = 0

    def look(self, job_id: str) -> fb.Look:
        return self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]

    def tick(self, job_id: str) -> fb.Tick | None:
        return self.late_tick

    def ending(self, job_id: str) -> fb.Ending:
        self.endings += 1
        return fb.Ending("FAILED", "127:0", LINE_127, self.log_path(job_id))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_watch_waits_through_pending_and_running_then_judges_the_tick(tmp_path: Path) -> None:
    clock = Clock()
    looker = Recorded(tmp_path, [fb.Look(pending("None"), None), fb.Look(running(), None),
                                 fb.Look(running(), fb.Tick(1, "node1", 5.0, None, None))])
    verdict = fb.watch("42", looker, 30.0, None, clock, clock.sleep)
    assert verdict.verdict == "lived" and clock.now == 2 * fb.POLL_S


def test_watch_gives_up_at_the_end_of_the_budget_with_the_reason(tmp_path: Path) -> None:
    clock = Clock()
    verdict = fb.watch("42", Recorded(tmp_path, [fb.Look(pending("Resources"), None)]), 5.0, None, clock,
                       clock.sleep)
    assert verdict.verdict == "pending" and clock.now == 5.0


def test_a_job_gone_from_the_queue_without_a_tick_is_failed_after_one_more_look(tmp_path: Path) -> None:
    clock = Clock()
    looker = Recorded(tmp_path, [fb.Look(running(), None), fb.Look(None, None)])
    verdict = fb.watch("42", looker, 30.0, "/home/u/sw/.venv/bin/python", clock, clock.sleep)
    assert verdict.verdict == "failed" and looker.endings == 1
    assert str(tmp_path / "scheduler" / "watchdogs-cron-42.out") in verdict.lines[1]


def test_a_job_that_ticked_just_before_it_left_the_queue_lived(tmp_path: Path) -> None:
    clock = Clock()
    looker = Recorded(tmp_path, [fb.Look(None, None)], late_tick=fb.Tick(1, "node1", 5.0, None, None))
    assert fb.watch("42", looker, 30.0, None, clock, clock.sleep).verdict == "lived"
