"""What the scheduler's records hold, as values: a finished run of an item, and one
scheduler instance's life (for the chain's crash-loop backoff). The tables are in
watchdogs.scheduler.records."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from watchdogs.result import CheckResult

T = TypeVar("T")


@dataclass(frozen=True)
class FinishedRun:
    """One finished run of an item, as the run history records it."""

    item: str
    kind: str
    instance: int | None
    started: float
    finished: float
    result: CheckResult | None
    """None: cut off by the scheduler stopping; counts as not run."""
    log: str | None = None
    job_id: str | None = None
    due: float | None = None
    """When it was due (its scheduled time); started - due is the scheduler's latency."""


@dataclass(frozen=True)
class Life:
    """One scheduler instance, as the crash-loop backoff sees it."""

    id: int
    job_id: str | None
    started: float
    heartbeat: float | None
    ended: float | None
    reason: str | None

    @property
    def last_seen(self) -> float:
        return self.ended or self.heartbeat or self.started


def cut_off_by_job_end(finished: list[tuple[FinishedRun, T]], stopping: Callable[[], bool], wait: float,
                       sleep: Callable[[float], None] = time.sleep) -> list[tuple[FinishedRun, T]]:
    """scancel, preemption or a node shutdown signal every process of the job at once,
    drop-ins included: a drop-in killed by a signal while we are stopping was cut off,
    which counts as not run, not as its result. The signal may reach the drop-in a
    moment before our own handler runs, so such a result waits `wait` seconds first."""
    killed = [run for run, _ in finished if run.result is not None and run.result.killed_by is not None]
    if not killed:
        return finished
    if not stopping():
        sleep(wait)
    if not stopping():
        return finished
    return [(replace(run, result=None) if run in killed else run, item) for run, item in finished]
