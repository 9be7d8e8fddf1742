"""Chores of the scheduler loop: work that runs every so often between ticks (the chain's
successor check, the config watch, the status page, the dead man's switch)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

LOG = logging.getLogger("watchdogs.scheduler")


@dataclass(frozen=True)
class Periodic:
    """A chore run from the loop every `every` seconds (e.g. the chain's successor check)."""

    every: float
    action: Callable[[float], None]
    name: str


def run_due(chores: Sequence[Periodic], now: float, last: dict[str, float]) -> None:
    """Run each chore whose time has come; a failing chore is logged and retried at its next
    time, never a reason to stop the loop."""
    for chore in chores:
        if now - last[chore.name] >= chore.every:
            last[chore.name] = now
            try:
                chore.action(now)
            except Exception:
                LOG.exception("%s failed; retried in %.0fs", chore.name, chore.every)
