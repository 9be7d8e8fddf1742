"""The forced-exit timer: ends a process whose loop never reaches a poll point.

A rank stuck in a collective (a peer died, NCCL hung) never sees its stop flag, never
exits 140, so the batch script never requeues and the job is killed at its time limit:
the chain breaks and the GPU is held until then. A daemon thread notices a stop signal
(it polls the flag a few times per second: nothing is started from the signal handler)
or is armed by the guard when it decides to stop; if the process is still alive when the
timer runs out it dumps every thread's stack to stderr (to show where it hung) and
`os._exit`s with the cause's exit code. How long it waits: `forced_timeout`.
"""
from __future__ import annotations

import faulthandler
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from trainguard.causes import Cause
from trainguard.stopping.signals import SignalFlag

if TYPE_CHECKING:
    from trainguard.config import GuardConfig

Clock = Callable[[], float]
# (seconds, exit code) for the signals in a pending mask: derived from the time left.
TimeoutFor = Callable[[int], "tuple[float, int]"]
FALLBACK_FORCED_EXIT = 300.0   # s, when the time left is unknown (no EndTime, no exit_after)
REQUEUE_RESERVE = 5.0          # s left to the batch script to requeue after a forced exit
MIN_FORCED_EXIT = 2.0


def forced_timeout(config: GuardConfig, time_left: float, kill_wait: float,
                   pending_signals: int) -> tuple[float, int]:
    """(seconds, exit code) for the forced-exit timer: the configured value, else the time
    left before the job's end minus a reserve for the requeue; for a plain SIGTERM, KillWait."""
    term = bool(pending_signals & (1 << signal.SIGTERM))
    code = config.policy.action(Cause.TERMINATE if term else Cause.TIME_LIMIT).exit_code
    if config.forced_exit:
        return config.forced_exit, code
    if term:
        return max(MIN_FORCED_EXIT, min(time_left, kill_wait) - 1.0), code
    if math.isinf(time_left):
        return FALLBACK_FORCED_EXIT, code
    return max(MIN_FORCED_EXIT, time_left - REQUEUE_RESERVE), code


class ForcedExit:
    def __init__(self, flag: SignalFlag, timeout_for: TimeoutFor, clock: Clock = time.monotonic,
                 before_exit: Callable[[int], None] = lambda code: None, tick: float = 0.1) -> None:
        self._flag = flag
        self._before_exit = before_exit
        self._timeout_for = timeout_for
        self._clock = clock
        self._tick = tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._acknowledged = 0          # signal bits already dealt with (armed or disarmed)
        self.deadline: float | None = None
        self.code = 0
        self.why = ""

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="trainguard-forced-exit", daemon=True)
            self._thread.start()

    def arm(self, seconds: float, code: int, why: str) -> None:
        """Called by the guard when it decides to stop (its exit code is the agreed one) and
        by the thread on a signal; an already running, sooner timer keeps its deadline."""
        at = self._clock() + seconds
        self.code, self.why = code, why
        if self.deadline is None or at < self.deadline:
            self.deadline = at

    def disarm(self) -> None:
        """The stop turned out to be a 'continue' (e.g. a policy that continues on USR1)."""
        self._acknowledged = self._flag.pending
        self.deadline = None

    def cancel(self) -> None:
        self._stop.set()
        self.deadline = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self._tick):
            pending = self._flag.pending & ~self._acknowledged
            if pending and self.deadline is None:
                self._acknowledged |= pending
                seconds, code = self._timeout_for(pending)
                self.arm(seconds, code, f"signal(s) {pending:#x} and no poll point reached")
            if self.deadline is not None and self._clock() >= self.deadline and not self._stop.is_set():
                self._force_exit()

    def _force_exit(self) -> None:
        # os._exit, not sys.exit: the main thread is stuck and would never run the SystemExit.
        # The stack dump shows where it was stuck; exit code = the cause's, so the batch script
        # still requeues after a time-limit warning (resuming from the last good checkpoint).
        message = (f"trainguard: forced exit with code {self.code}: {self.why}; "
                   "the training loop did not reach a poll point in time. Stacks:\n")
        try:
            sys.stderr.write(message)
            sys.stderr.flush()
            faulthandler.dump_traceback(all_threads=True)
            self._before_exit(self.code)
        finally:
            os._exit(self.code)
