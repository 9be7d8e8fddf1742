"""What the scheduler's records hold, as values: a finished run of an item, and one
scheduler instance's life (for the chain's crash-loop backoff). The tables are in
watchdogs.scheduler.records."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchdogs.result import CheckResult


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
