"""EndTime from the controller: warning vs user signal, preemption vs plain scancel."""
from __future__ import annotations

import math

from trainguard._run import run_slurm
from trainguard.causes import Cause
from trainguard.deadline import Deadline, Margin
from trainguard.errors import SlurmError, SlurmInterrupted
from trainguard.slurm import JobTimes

WALL0 = 1.8e9


class Controller:
    """Answers `scontrol show job` as the controller would, from what the test sets."""

    def __init__(self, state: str = "RUNNING", end: float | None = WALL0 + 3600) -> None:
        self.state, self.end, self.down, self.calls = state, end, False, 0
        self.killed = 0     # answers lost to a signal that killed the asking scontrol

    def __call__(self) -> JobTimes:
        self.calls += 1
        if self.killed:
            self.killed -= 1
            run_slurm(["sh", "-c", "kill -TERM $$"])    # a real client killed by the step's TERM
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


def test_a_preemption_whose_term_also_killed_our_scontrol_is_still_a_preemption() -> None:
    controller = Controller(end=WALL0 + 3600)
    deadline = started(controller)
    controller.end, controller.killed = WALL0 + 30, 2      # the TERM, then the script's forward
    assert deadline.classify_term(10.0, WALL0 + 10) is Cause.PREEMPTION


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
    assert deadline._thread is not None
    deadline._thread.join(5)
    deadline.take_latest(31.0, WALL0 + 31)
    assert controller.calls == 2 and deadline.deadline == 7200.0 and not deadline.moved_earlier
