"""Back off when the controller says it is busy or rate-limiting us.

Retrying at once is what a rate-limited controller asks us not to do, so after a SlurmBusy
the next calls of that kind are skipped (UNKNOWN) until a delay that doubles with each
failure has passed. The delay is kept in the state database, so it survives restarts.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from watchdogs.slurmctl.runner import SlurmBusy

if TYPE_CHECKING:
    from watchdogs.state.store import StateStore

T = TypeVar("T")
NAMESPACE = "slurmctl.backoff"


@dataclass(frozen=True)
class Backoff:
    failures: int = 0
    until: float = 0.0

    def after_failure(self, now: float, base: float = 20.0, cap: float = 600.0) -> Backoff:
        """Wait base, 2*base, 4*base... capped; a pure function of the previous state."""
        delay = min(cap, base * 2 ** self.failures)
        return Backoff(self.failures + 1, now + delay)

    def blocks(self, now: float) -> bool:
        return now < self.until


def guarded(store: StateStore, key: str, now: float, call: Callable[[], T]) -> T:
    """`call()` unless backing off for `key`; records busy replies and recoveries."""
    state = Backoff(**store.kv_get(NAMESPACE, key, {}))
    if state.blocks(now):
        raise SlurmBusy(f"the Slurm controller asked us to slow down; backing off for "
                        f"{state.until - now:.0f}s more after {state.failures} busy replies")
    try:
        value = call()
    except SlurmBusy:
        nxt = state.after_failure(now)
        store.kv_put(NAMESPACE, key, {"failures": nxt.failures, "until": nxt.until})
        raise
    if state.failures:
        store.kv_put(NAMESPACE, key, {})
    return value
