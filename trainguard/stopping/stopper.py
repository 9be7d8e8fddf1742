"""Carrying a stop out, in one owner: whether the guard has finished or is exiting the
process, the forced-exit timer and the time it allows, the PID file for the batch script's
trap, the stop's words in the log, and the way out (exit-code file, self-requeue, leaving
torch.distributed, the fast exit: trainguard.stopping.exits).

The Guard decides *that* it stops; this object makes the stop happen, also when the loop
never gets back to a poll point (the timer `os._exit`s a rank stuck in a collective). Once
exiting, the signal handlers stay: a repeated USR1 or TERM while `finally` blocks and atexit
handlers run must not end a saved job with 138/143. A normal `finish()` (the training is
done, the script goes on) puts the previous handlers back.
"""
from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from trainguard.causes import Cause, Decision
from trainguard.stopping.exits import ProcessExit, Requeued
from trainguard.stopping.fast_exit import FastExit
from trainguard.stopping.forced_exit import ForcedExit, forced_timeout

if TYPE_CHECKING:
    from trainguard.config import GuardConfig
    from trainguard.stopping.agreement import Agreement
    from trainguard.stopping.sensors import Sensors
    from trainguard.stopping.signals import SignalFlag

log = logging.getLogger("trainguard")
Clock = Callable[[], float]


def write_pid(pid_file: Path | None) -> None:
    """Append this process's PID, one line, for the batch script's trap: it signals the
    processes listed there when they were started directly in the batch shell."""
    if pid_file is None:
        return
    fd = os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)


def log_stop_line(decision: Decision, step: int, saved: bool = True) -> str:
    """Log what the stop does, in words; returns them for the exit file (the batch script's
    line). A requeue without a checkpoint (a hang) says so: the work since the last save is lost."""
    action = decision.action
    if action.requeue:
        what = (f"checkpoint saved at step {step}: requeue" if saved else
                "no checkpoint saved: requeue, resuming from the last checkpoint (the work "
                "since it is lost)")
    else:
        what = (f"checkpoint saved at step {step}: not requeued" if saved else
                "no checkpoint saved: not requeued")
    others = sorted(c.label for c in decision.causes - {decision.cause, Cause.NO_TIME})
    also = f" (also: {', '.join(others)})" if others else ""
    log.warning("trainguard: stopping after step %d: %s%s -> exit %d (%s)", step, decision.cause.label,
                also, action.exit_code, what)
    # The batch script says "requeueing" or "not requeueing" itself.
    kept = (f"checkpoint saved at step {step}" if saved else
            "NO checkpoint saved (the work since the last one is lost)")
    return f"{decision.cause.label} after step {step}{also}; {kept}"


class Stopper:
    """`rank` and `agreement` are this process's once the ranks are known (`bind`)."""

    def __init__(self, config: GuardConfig, job_id: str, signals: SignalFlag, sensors: Sensors,
                 clock: Clock, rank: int, requeue: Callable[[str], Requeued]) -> None:
        self.config, self.job_id = config, job_id
        self.signals, self.sensors, self._clock = signals, sensors, clock
        self.rank = rank
        self.agreement: Agreement | None = None
        self.fast_exit = FastExit()
        self.exits = ProcessExit(config.exit_file, self.fast_exit, requeue)
        self.forced = (ForcedExit(signals, self.timeout, clock, self._write_code)
                       if config.forced_exit != 0 else None)
        self._finished = self._exiting = False

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def exiting(self) -> bool:
        """The guard decided to end the process (its handlers then stay until the end)."""
        return self._exiting

    def start(self) -> None:
        """Ready to be stopped: the timer's thread (it notices a signal the loop never polls),
        the PID file for the batch script's trap, the fast exit."""
        if self.forced is not None:
            self.forced.start()
        write_pid(self.config.pid_file)
        if self.config.fast_exit:
            self.fast_exit.install()

    def bind(self, rank: int, agreement: Agreement | None) -> None:
        self.rank, self.agreement = rank, agreement

    # ---- the forced-exit timer -----------------------------------------------------------
    def timeout(self, pending_signals: int) -> tuple[float, int]:
        return forced_timeout(self.config, self.sensors.deadline.deadline - self._clock(),
                              self.sensors.kill_wait, pending_signals)

    def arm(self, decision: Decision) -> None:
        """Start the timer for a stop: covers a save or a teardown that hangs (a peer died
        mid-collective)."""
        if decision.action.stop and self.forced is not None:
            term = 1 << signal.SIGTERM if decision.cause is Cause.TERMINATE else 0
            self.forced.arm(self.timeout(term)[0], decision.action.exit_code,
                            f"stopping ({decision.cause.label})")

    def disarm(self) -> None:
        """The decision turned out to be a 'continue'."""
        if self.forced is not None:
            self.forced.disarm()

    def _write_code(self, code: int) -> None:
        self.exits.write_code(code, self.rank)

    # ---- the way out ---------------------------------------------------------------------
    def after_exception(self, exc: BaseException, step: int, save: Callable[[], None]) -> int:
        """The loop raised: log it, arm the timer, `save` (this rank alone: its peers are
        elsewhere) unless the policy says never. Returns the exit code (the caller exits)."""
        action = self.config.policy.action(Cause.EXCEPTION)
        log.error("trainguard: the training raised %s: %s", type(exc).__name__, exc, exc_info=exc)
        if self.forced is not None:
            self.forced.arm(self.timeout(0)[0], action.exit_code, "saving after an exception")
        if action.save.value != "never":
            save()
        log_stop_line(Decision(Cause.EXCEPTION, action, frozenset({Cause.EXCEPTION})), step)
        return action.exit_code

    def finish(self) -> bool:
        """Cancel the timer and, unless exiting, put the previous signal handlers back.
        False when finished already (the caller's own end work is done once too)."""
        if self._finished:
            return False
        self._finished = True
        if self.forced is not None:
            self.forced.cancel()
        if not self._exiting:
            self.signals.restore()
        return True

    def begin_exit(self) -> None:
        # From here on finish() keeps the signal handlers (see the module docstring).
        self._exiting = True
        self.sensors.log_late_signals()

    def exit(self, code: int, requeue: bool = False, why: str = "") -> NoReturn:
        """The exit-code file, the self-requeue (rank 0: one per job) and the exit itself."""
        if requeue and self.rank == 0:
            self.exits.requeue(self.job_id)
        self.exits.exit(code, self.rank, self.agreement, why)

    def leave(self, code: int) -> NoReturn:
        """The exit of a finished training: no exit file (the launcher's code stands)."""
        self.exits.leave(code, self.agreement)
