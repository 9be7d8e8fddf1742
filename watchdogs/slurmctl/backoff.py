"""Back off when the controller says it is busy or rate-limiting us, or does not answer.

Retrying at once is what a rate-limited controller asks us not to do, so after a SlurmBusy
the next calls of that kind are skipped (UNKNOWN) until a delay that doubles with each
failure has passed. The delay is kept in the state database, so it survives restarts, with
the last failure's words: a controller that did not answer (hung, unreachable) is said to
have not answered, never to have "asked us to slow down".
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
    why: str = ""
    """The last failure, as the runner said it ("squeue did not answer within 30s")."""

    def after_failure(self, now: float, why: str = "", base: float = 20.0, cap: float = 600.0) -> Backoff:
        """Wait base, 2*base, 4*base... capped; a pure function of the previous state."""
        delay = min(cap, base * 2 ** self.failures)
        return Backoff(self.failures + 1, now + delay, why)

    def describe(self, now: float) -> str:
        hung = "did not answer" in self.why
        cause = ("the Slurm controller did not answer (hung, overloaded or unreachable)" if hung
                 else "the Slurm controller said it is busy")
        last = f"; last: {self.why}" if self.why else ""
        return (f"{cause}; not asking again for {self.until - now:.0f}s more after "
                f"{self.failures} failed call(s){last}")

    def blocks(self, now: float) -> bool:
        return now < self.until


def guarded(store: StateStore, key: str, now: float, call: Callable[[], T]) -> T:
    """`call()` unless backing off for `key`; records busy replies and recoveries."""
    stored = store.kv_get(NAMESPACE, key, {})
    state = Backoff(**{k: v for k, v in stored.items() if k in ("failures", "until", "why")})
    if state.blocks(now):
        raise SlurmBusy(state.describe(now))
    try:
        value = call()
    except SlurmBusy as exc:
        nxt = state.after_failure(now, str(exc)[:300])
        store.kv_put(NAMESPACE, key, {"failures": nxt.failures, "until": nxt.until, "why": nxt.why})
        raise
    if state.failures:
        store.kv_put(NAMESPACE, key, {})
    return value
