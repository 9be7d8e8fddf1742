"""Outcomes held back by the loop until their batch has settled, so one tick's news goes
out as one message even when its items finish a moment apart."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchdogs.sink import ItemOutcome

SETTLE_S = 20.0
"""How long finished results wait for the rest of their batch."""


class HeldOutcomes:
    """Outcomes waiting for the sink, and since when the oldest of them waits (a monotonic
    clock, passed in)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.outcomes: list[ItemOutcome] = []
        self.since = 0.0

    def add(self, made: Iterable[ItemOutcome]) -> None:
        made = list(made)
        if made:
            self.outcomes += made
            self.since = self.since or self.clock()

    def take(self, busy: bool, tick: bool, running_starts: Iterable[float]) -> list[ItemOutcome]:
        """The outcomes to hand to the sink now, or none: as soon as nothing runs any more,
        else at a tick once the batches of the waiting outcomes have settled (none of their
        items still runs), but never later than SETTLE_S after the first of them finished:
        a slow drop-in holds back its batch's alerts for that long at most."""
        if not self.outcomes:
            self.since = 0.0
            return []
        held = self.clock() - self.since
        if busy and (not tick or (self._unsettled(running_starts) and held < SETTLE_S)):
            return []
        outcomes, self.outcomes, self.since = self.outcomes, [], 0.0
        return outcomes

    def _unsettled(self, running_starts: Iterable[float]) -> bool:
        """Does an item started with one of the waiting outcomes still run?"""
        batches = {round(o.started.timestamp(), 3) for o in self.outcomes}
        return any(round(started, 3) in batches for started in running_starts)
