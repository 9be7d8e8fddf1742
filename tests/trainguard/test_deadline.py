"""EndTime from the controller: warning vs user signal, preemption vs plain scancel."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from trainguard.causes import Cause
from trainguard.errors import SlurmError, SlurmInterrupted
from trainguard.slurm.job import JobTimes, format_epoch, query_job
from trainguard.slurm.run import INTERRUPTED_ATTEMPTS, run_slurm
from trainguard.stopping.deadline import Deadline, Margin

WALL0 = 1.8e9


class Controller:
    """Answers `scontrol show job` as the controller would, from what the test sets."""

    def __init__(self, state: str = "RUNNING", end: float | None = WALL0 + 3600) -> None:
        self.state, self.end, self.down, self.calls = state, end, False, 0

    def __call__(self) -> JobTimes:
        self.calls += 1
        if self.down:
            raise SlurmError("scontrol did not answer within 10s")
        return JobTimes(self.state, self.end, 3600.0, WALL0)


def started(controller: Controller) -> Deadline:
    deadline = Deadline(controller, every=30.0, warning_lead=120.0)
    deadline.start(now=0.0, wall=WALL0, exit_after=None)
    return deadline


def test_a_usr1_near_endtime_is_the_time_limit_warning_else_a_users_signal() -> None:
    deadline = started(Controller(end=WALL0 + 3600))
    assert deadline.classify_usr(WALL0) is Cause.USER_SIGNAL
    assert deadline.classify_usr(WALL0 + 3600 - 90) is Cause.TIME_LIMIT


def test_an_endtime_moved_to_now_plus_grace_is_a_preemption() -> None:
    controller = Controller(end=WALL0 + 3600)
    deadline = started(controller)
    assert deadline.deadline == 3600.0
    controller.end = WALL0 + 100 + 20                        # preempted at t=100, GraceTime 20
    deadline.apply(controller(), now=100.0, wall=WALL0 + 100)
    assert deadline.moved_earlier and deadline.deadline == 120.0
    assert deadline.stop_at(1.0, Margin(save_time=3.0, safety=2.0)) == 114.0
    assert deadline.deadline_cause() is Cause.PREEMPTION


def test_sigterm_while_running_with_a_moved_endtime_is_preemption_and_while_cancelled_terminate() -> None:
    controller = Controller(end=WALL0 + 3600)
    deadline = started(controller)
    controller.end = WALL0 + 30
    assert deadline.classify_term(10.0, WALL0 + 10) is Cause.PREEMPTION
    cancelled = started(Controller(state="COMPLETING", end=WALL0 + 10))
    assert cancelled.classify_term(10.0, WALL0 + 10) is Cause.TERMINATE


# A `scontrol` that the job step's TERM kills while `kills` says so, then answers `show job`
# from `end` (what the controller says). Each call is logged.
KILLED_SCONTROL = """#!/bin/sh
echo "$*" >> "{root}/calls"
n=$(cat "{root}/kills")
if [ "$n" -gt 0 ]; then echo $((n - 1)) > "{root}/kills"; kill -TERM $$; fi
echo "JobId=7 JobState=RUNNING TimeLimit=01:00:00 EndTime=$(cat "{root}/end")"
"""


class KilledClient:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.set(kills=0, end=WALL0 + 3600)

    def set(self, kills: int, end: float) -> None:
        (self.root / "kills").write_text(f"{kills}\n")
        (self.root / "end").write_text(format_epoch(end))

    def calls(self) -> list[str]:
        path = self.root / "calls"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def killed_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KilledClient:
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(KILLED_SCONTROL.format(root=tmp_path))
    scontrol.chmod(0o700)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return KilledClient(tmp_path)


def test_a_preemption_whose_term_also_killed_our_scontrol_is_still_a_preemption(
        killed_client: KilledClient) -> None:
    deadline = Deadline(lambda: query_job("7", wall=WALL0), every=30.0, warning_lead=120.0)
    deadline.start(now=0.0, wall=WALL0, exit_after=None)
    killed_client.set(kills=2, end=WALL0 + 30)     # the TERM, then the batch script's forward
    assert deadline.classify_term(10.0, WALL0 + 10) is Cause.PREEMPTION
    assert killed_client.calls().count("show job -o 7") == 1 + 3


def test_a_query_killed_every_time_is_asked_a_bounded_number_of_times(killed_client: KilledClient) -> None:
    killed_client.set(kills=100, end=WALL0)
    with pytest.raises(SlurmInterrupted, match="scontrol was killed by SIGTERM"):
        run_slurm(["scontrol", "show", "job", "-o", "7"])
    assert len(killed_client.calls()) == INTERRUPTED_ATTEMPTS


def test_a_killed_command_that_changes_state_is_not_repeated(killed_client: KilledClient) -> None:
    killed_client.set(kills=1, end=WALL0)
    with pytest.raises(SlurmInterrupted):
        run_slurm(["scontrol", "requeue", "7"])    # it may have taken effect: never twice
    assert killed_client.calls() == ["requeue 7"]


def test_a_client_killed_by_a_signal_is_told_apart_from_a_controller_error() -> None:
    try:
        run_slurm(["sh", "-c", "kill -TERM $$"])
    except SlurmInterrupted as exc:
        assert str(exc) == "sh was killed by SIGTERM"
    else:
        raise AssertionError("no SlurmInterrupted")


def test_a_stopped_controller_is_asked_once_per_classification() -> None:
    controller = Controller()
    deadline = started(controller)
    controller.down, calls = True, controller.calls
    assert deadline.classify_term(1.0, WALL0 + 1) is Cause.TERMINATE
    assert controller.calls == calls + 1    # no retries that would spend KillWait


def test_a_stopped_controller_means_no_deadline_not_a_crash() -> None:
    controller = Controller()
    controller.down = True
    deadline = started(controller)
    assert math.isinf(deadline.deadline)
    assert deadline.classify_term(1.0, WALL0 + 1) is Cause.TERMINATE


def test_endtime_is_reread_in_the_background_at_its_cadence_only() -> None:
    controller = Controller(end=WALL0 + 3600)
    deadline = started(controller)
    assert controller.calls == 1
    deadline.maybe_refresh(10.0)
    assert controller.calls == 1                              # not due before 30 s
    controller.end = WALL0 + 7200                             # an admin extended the limit
    deadline.maybe_refresh(30.0)
    assert deadline.refresh_thread is not None
    deadline.refresh_thread.join(5)
    deadline.take_latest(31.0, WALL0 + 31)
    assert controller.calls == 2 and deadline.deadline == 7200.0 and not deadline.moved_earlier
