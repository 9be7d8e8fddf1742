"""The progress watchdog: notices a training that stopped making progress, from inside.

A daemon thread wakes a few times per second-ish and compares the time since the last
completed step with a budget. It reads only what the guard's poll point already records
(the last step and the monotonic time it completed), so the training's hot path does no
extra work. The budget is learned from the step times it observes:

    budget = clamp(hang_multiple * percentile(step times, hang_percentile), hang_floor, hang_ceiling)

Before the first step time is known the budget is `hang_first_step` (default: the ceiling).
Declared phases (`with guard.phase("eval"):`, saves) have their own budgets, so a long
save or evaluation is not a hang. Every budget is bounded by the time left to the job's
EndTime (less a reserve for the requeue), so a hang close to the end is still requeued.
`stopping` and `done` are not watched (the forced-exit timer covers a stop that hangs).

What happens on a hang is trainguard.hangs.response's job.
"""
from __future__ import annotations

import bisect
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger("trainguard")
Clock = Callable[[], float]
FINAL = ("stopping", "done", "failed")   # the guard is finishing: the watch ends
UNWATCHED = ("start", "hung", *FINAL)
SAMPLES = 512          # step-time samples kept (the newest)
MIN_TICK, MAX_TICK = 0.05, 1.0


@dataclass(frozen=True)
class HangLimits:
    floor: float = 300.0
    ceiling: float = 3600.0
    multiple: float = 10.0
    percentile: float = 99.0
    first_step: float | None = None                      # None: the ceiling
    phases: Mapping[str, float] = field(default_factory=dict)   # phase -> budget (s)
    reserve: float = 10.0                                 # s kept before EndTime for the requeue

    def __post_init__(self) -> None:
        if not 0 < self.floor <= self.ceiling:
            raise ValueError(f"hang_floor = {self.floor}, hang_ceiling = {self.ceiling}: expected "
                             "0 < floor <= ceiling")
        if self.multiple < 1:
            raise ValueError(f"hang_multiple = {self.multiple}: expected a number >= 1")
        if not 0 < self.percentile <= 100:
            raise ValueError(f"hang_percentile = {self.percentile}: expected a number in (0, 100]")
        for name, value in (*((f"hang_{p}", b) for p, b in self.phases.items()),
                            ("hang_first_step", self.first_step)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} = {value}: expected a duration > 0")

    def for_phase(self, phase: str) -> float:
        return self.phases.get(phase, self.ceiling)

    @property
    def tick(self) -> float:
        """How often the thread looks: a small fraction of the smallest budget."""
        smallest = min([self.floor, *self.phases.values()])
        return min(MAX_TICK, max(MIN_TICK, smallest / 8))


@dataclass(frozen=True)
class Stall:
    """One detected hang: the phase, the last completed step, for how long, and the budget."""

    phase: str
    step: int
    stalled_for: float
    budget: float


class StepBudget:
    """Step times from (step, completion time) observations; the learned budget. Pure."""

    def __init__(self, limits: HangLimits) -> None:
        self.limits = limits
        self._samples: deque[float] = deque(maxlen=SAMPLES)
        self._sorted: list[float] = []
        self._last: tuple[int, float] | None = None
        self.base: float | None = None          # the percentile of the step times

    def forget_position(self) -> None:
        """A phase or a save came in between: the next interval is not a step time."""
        self._last = None

    def observe(self, step: int, tick: float) -> None:
        last, self._last = self._last, (step, tick)
        if last is None or step <= last[0] or tick <= last[1]:
            return
        # The mean over the steps completed since the previous look: the thread looks a
        # few times per second, the loop may do thousands of steps in between.
        self._add((tick - last[1]) / (step - last[0]))

    def _add(self, sample: float) -> None:
        if len(self._samples) == self._samples.maxlen:
            old = self._samples[0]
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        self._samples.append(sample)
        bisect.insort(self._sorted, sample)
        index = min(len(self._sorted) - 1, math.ceil(self.limits.percentile / 100 * len(self._sorted)) - 1)
        self.base = self._sorted[max(0, index)]

    @property
    def budget(self) -> float:
        lim = self.limits
        if self.base is None:
            return lim.first_step if lim.first_step is not None else lim.ceiling
        return min(lim.ceiling, max(lim.floor, lim.multiple * self.base))


def allowed(limit: float, since: float, deadline: float, reserve: float, base: float | None) -> float:
    """`limit`, bounded by the time from `since` to the deadline less `reserve`; never below
    twice the usual step time (a step finishing normally just before the end is no hang)."""
    if math.isinf(deadline):
        return limit
    left = deadline - reserve - since
    minimum = min(limit, max(1.0, 2 * (base or 0.0)))
    return min(limit, max(left, minimum))


class HangWatch:
    """The thread. `progress()` returns (last completed step, its monotonic time);
    `deadline()` the job's end (monotonic, inf when unknown); `on_hang(stall)` acts and
    returns True to keep watching (a report-only policy) — it normally exits the process.
    `threaded=False`: no thread; the caller looks (`look`) itself, as a test does."""

    def __init__(self, limits: HangLimits, progress: Callable[[], tuple[int, float]],
                 deadline: Callable[[], float], on_hang: Callable[[Stall], bool],
                 clock: Clock, threaded: bool = True) -> None:
        self.limits = limits
        self.threaded = threaded
        self.budget = StepBudget(limits)
        self._progress, self._deadline, self._on_hang, self._clock = progress, deadline, on_hang, clock
        self._phase: tuple[str, float, int] = ("start", clock(), 0)
        self._seen_phase = 0
        self._reported: tuple[int, float] | None = None   # (phase generation, stall start)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def phase_changed(self, phase: str, now: float) -> None:
        """From the guard (its heartbeat phase): one tuple store, read by the thread."""
        self._phase = (phase, now, self._phase[2] + 1)
        if phase in FINAL:
            self.stop()
        elif phase == "train" and self._thread is None and self.threaded:
            self.start()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="trainguard-hang", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    @property
    def reported(self) -> bool:
        """A stall was reported (its response may be ending the process right now)."""
        return self._reported is not None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def leave_exit_to_response(self, exc: BaseException) -> None:
        """The training raised `exc` while the response to a reported hang runs: a peer that
        ended for the hang broke this rank's collective, so the exception is the hang's echo.
        Wait for the response, which exits with its own code (a save here, of a state the
        ranks never agreed on, and exit 1 would end a run that restarts)."""
        if not (self.reported and self.alive):
            return
        log.error("trainguard: the training raised %s after the hang was reported: "
                  "leaving the exit to the hang's response", type(exc).__name__)
        while self.alive:
            time.sleep(0.1)

    def _run(self) -> None:
        while not self._stop.wait(self.limits.tick):
            stall = self.look(self._clock())
            if stall is not None and not self._stop.is_set() and not self._on_hang(stall):
                return

    def look(self, now: float) -> Stall | None:
        """One look: a Stall when the current phase ran out of budget (once per stall)."""
        phase, entered, generation = self._phase
        if phase in UNWATCHED:
            return None
        step, tick = self._progress()
        if generation != self._seen_phase:
            self._seen_phase = generation
            self.budget.forget_position()
        if phase == "train":
            self.budget.observe(step, tick)
            since, limit = max(tick, entered), self.budget.budget
        else:
            since, limit = entered, self.limits.for_phase(phase)
        limit = allowed(limit, since, self._deadline(), self.limits.reserve, self.budget.base)
        if now - since <= limit or self._reported == (generation, since):
            return None
        self._reported = (generation, since)
        return Stall(phase, step, now - since, limit)
