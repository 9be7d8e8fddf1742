"""The training's story and the nodes over time, as the page reads them from the history
the scheduler keeps (watchdogs.state.history): events told apart, samples of step,
throughput and loss, drained/down counts and the current reasons."""
from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from watchdogs.state import history

T = TypeVar("T")


@dataclass(frozen=True)
class TrainingStory:
    item: str
    events: tuple[history.Event, ...]
    """Oldest first."""
    samples: tuple[history.Sample, ...]
    """From a `training` check linked to this job check (none without one)."""

    @property
    def requeues(self) -> int:
        return sum(1 for e in self.events if e.kind in history.REQUEUES)

    @property
    def checkpoints(self) -> tuple[tuple[float, int], ...]:
        """(first seen, step) of each newer checkpoint the samples name."""
        found: list[tuple[float, int]] = []
        for s in self.samples:
            if s.checkpoint_step is not None and (not found or s.checkpoint_step > found[-1][1]):
                found.append((s.t, s.checkpoint_step))
        return tuple(found)


@dataclass(frozen=True)
class NodesHistory:
    counts: tuple[history.NodeCount, ...]
    reasons: tuple[tuple[str, str, str], ...]
    """(node, state, reason) of every drained/down node at the last look."""


def _or_empty(read: Callable[[], tuple[T, ...]]) -> tuple[T, ...]:
    """Nothing when the history was never written (a database from before it)."""
    try:
        return read()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return ()
        raise


def training(db: sqlite3.Connection, item: str, since: float) -> TrainingStory:
    return TrainingStory(item, _or_empty(lambda: history.events(db, item, since)),
                         _or_empty(lambda: history.samples(db, item, since)))


def nodes(db: sqlite3.Connection, item: str, since: float) -> NodesHistory:
    return NodesHistory(_or_empty(lambda: history.node_counts(db, item, since)),
                        _or_empty(lambda: history.node_reasons(db, item)))
