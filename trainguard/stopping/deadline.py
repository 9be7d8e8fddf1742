"""The deadline: `exit_after` and the job's EndTime, with an adaptive margin.

The guard stops when the time left is less than the longest recent step + the save time +
a safety margin, so no step is lost and little time is wasted. EndTime is read from the
controller at start and re-read every `endtime_every` seconds in a short-lived background
thread (the training loop never waits for the controller); an EndTime that moves earlier
is how a preemption with GraceTime shows when no signal reaches the training.

All methods take the monotonic time `now` (and, where EndTime is involved, the wall time)
as arguments, so the logic is testable without sleeping.
"""
from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from trainguard.causes import Cause
from trainguard.errors import SlurmError
from trainguard.slurm.job import JobTimes, format_epoch, query_job

log = logging.getLogger("trainguard")
Query = Callable[[], JobTimes]


class StepTimes:
    """The longest step seen in the current and the previous window (O(1) per step)."""

    def __init__(self, window: float, now: float) -> None:
        self.window = window
        self.current = 0.0
        self.previous = 0.0
        self.window_start = now

    def roll(self, now: float) -> None:
        if now - self.window_start >= self.window:
            self.previous, self.current, self.window_start = self.current, 0.0, now

    @property
    def recent_max(self) -> float:
        return max(self.current, self.previous)


@dataclass(frozen=True)
class Margin:
    save_time: float
    safety: float
    steps_before_decision: int = 1   # a distributed decision waits for the next sync step
    measured: bool = False           # save_time was timed (else it is the configured estimate)

    @property
    def measured_save(self) -> float | None:
        return self.save_time if self.measured else None

    def needed(self, longest_step: float) -> float:
        return longest_step * self.steps_before_decision + self.save_time + self.safety


class Deadline:
    """`deadline` is the monotonic time at which the job ends (inf when unknown)."""

    def __init__(self, query: Query | None, every: float, warning_lead: float) -> None:
        self.query = query
        self.every = every
        self.warning_lead = warning_lead
        self.exit_after_at = math.inf
        self.end_at = math.inf            # from EndTime, monotonic
        self.end_time: float | None = None  # EndTime, wall clock
        self.first: JobTimes | None = None
        self.moved_earlier = False
        self.next_refresh = math.inf
        self._latest: JobTimes | None = None   # written by the refresh thread
        self._thread: threading.Thread | None = None

    @property
    def deadline(self) -> float:
        return min(self.exit_after_at, self.end_at)

    @property
    def refresh_thread(self) -> threading.Thread | None:
        """The latest background re-read of EndTime (None before the first): a test joins it."""
        return self._thread

    def start(self, now: float, wall: float, exit_after: float | None) -> None:
        if exit_after:
            self.exit_after_at = now + exit_after
        if self.query is not None:
            times = self._read()
            if times is not None:
                self.first = times
                self.apply(times, now, wall)
            self.next_refresh = now + self.every

    def _read(self) -> JobTimes | None:
        # One query: run_slurm itself asks again when the step's own TERM killed it; a busy or
        # stopped controller waits for the next refresh (retries here would spend KillWait).
        assert self.query is not None
        try:
            return self.query()
        except SlurmError as exc:
            log.warning("trainguard: cannot read the job's EndTime (will retry): %s", exc)
            return None

    def _refresh_in_thread(self) -> None:
        times = self._read()
        if times is not None:
            self._latest = times

    def maybe_refresh(self, now: float) -> None:
        """Start a background re-read when due; pick up the result of the previous one."""
        if now < self.next_refresh or self.query is None:
            return
        self.next_refresh = now + self.every
        if self._thread is None or not self._thread.is_alive():
            # A thread, so that a slow or stopped controller never stalls the training step.
            self._thread = threading.Thread(target=self._refresh_in_thread, name="trainguard-endtime",
                                            daemon=True)
            self._thread.start()

    def take_latest(self, now: float, wall: float) -> None:
        latest, self._latest = self._latest, None
        if latest is not None:
            self.apply(latest, now, wall)

    def apply(self, times: JobTimes, now: float, wall: float) -> None:
        # A cancelled job's EndTime is the cancel time: not a deadline to save before.
        if times.end_time is None or times.being_cancelled:
            return
        if self.end_time is not None and times.end_time < self.end_time - 1:
            log.warning("trainguard: the job's EndTime moved earlier, to %s (preemption with "
                        "GraceTime, or a shortened limit)", format_epoch(times.end_time))
            self.moved_earlier = True
        self.end_time = times.end_time
        self.end_at = now + (times.end_time - wall)

    def stop_at(self, longest_step: float, margin: Margin) -> float:
        return self.deadline - margin.needed(longest_step)

    def deadline_cause(self) -> Cause:
        return Cause.PREEMPTION if self.moved_earlier and self.end_at <= self.exit_after_at \
            else Cause.TIME_LIMIT

    def classify_usr(self, wall: float) -> Cause:
        """A USR1/USR2 close to EndTime is SLURM's `--signal` warning; elsewhere a user's."""
        if self.end_time is not None and self.end_time - wall <= self.warning_lead:
            return Cause.TIME_LIMIT
        return Cause.USER_SIGNAL

    def classify_term(self, now: float, wall: float) -> Cause:
        """SIGTERM: a plain scancel (the job is being cancelled) or a preemption (the job is
        still RUNNING and EndTime moved to now + GraceTime). Asks the controller at once."""
        if self.query is None:
            return Cause.TERMINATE
        times = self._read()
        if times is None:
            return Cause.TERMINATE
        if times.being_cancelled:
            return Cause.TERMINATE
        self.apply(times, now, wall)
        near_end = times.end_time is not None and times.end_time - wall <= self.warning_lead
        if self.moved_earlier:
            return Cause.PREEMPTION
        return Cause.TIME_LIMIT if near_end else Cause.TERMINATE


def slurm_query(job_id: str) -> Query:
    return lambda: query_job(job_id)
