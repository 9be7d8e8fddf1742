"""The seam between the scheduler and alert delivery.

The scheduler hands every tick's outcomes to one ResultSink (`watchdogs.alerts.build_sink`)
in a single call, so a channel can group a tick into one message, and calls `flush` every
tick so queued deliveries are retried.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from watchdogs.result import CheckResult, storable


@dataclass(frozen=True)
class ItemOutcome:
    """One finished run of one scheduled item: a built-in check or a drop-in."""

    item: str
    """Unique id: the check's name, or a drop-in's id such as "cron.hourly/check_gpu"."""
    kind: str
    """"check", "dropin" (executable), "slurm" (submitted *.slurm) or "crontab"."""
    result: CheckResult
    started: datetime
    finished: datetime
    notify: Mapping[str, tuple[str, ...]] | None = None
    """The item's own route by severity; None means the [alerts] default route."""
    runbook: str | None = None
    after: int | None = None
    repeat_every: float | None = None
    log: str | None = None
    """The run's log file (a drop-in's output), for the alert's `next:` line."""
    seen_late: tuple[float, float] | None = None
    """(from, to): a catch-up run after nothing watched in that window (issue 34): whatever
    it found may have happened at any time in it, and its alert says so."""

    def __post_init__(self) -> None:
        # The item is an id made of a file name (a drop-in's, a refused path): stored, keyed
        # on, shown. A byte that is not UTF-8 in it is `\xNN` from here on (textsafe.from_os).
        storable(self, "item", "log")  # keys and paths: surrogates only, existing ids unchanged
        storable(self, "runbook", lines=True)


class ResultSink(Protocol):
    def handle(self, outcomes: Sequence[ItemOutcome], now: datetime) -> None:
        """Record outcomes and enqueue whatever notifications they cause. Must be quick and
        must not raise for a delivery problem (delivery happens in `flush`)."""

    def flush(self, now: datetime, force: bool = False) -> None:
        """Try pending deliveries whose backoff has passed (all of them when `force`)."""
