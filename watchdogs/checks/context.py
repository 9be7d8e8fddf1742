"""What a tick hands to the checks it runs: the time, the state store, and memoised
snapshots shared by every check in the tick (one squeue and one sinfo, whatever the
number of checks)."""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from watchdogs.checks.base import Check
    from watchdogs.config.model import Config
    from watchdogs.result import CheckResult
    from watchdogs.state.store import StateStore

T = TypeVar("T")


class TickContext:
    def __init__(self, now: datetime, store: StateStore, checks: Sequence[Check] = (),
                 env: Mapping[str, str] | None = None, config: Config | None = None,
                 watchers: Sequence[object] = ()) -> None:
        self.now = now
        self.config = config
        self.store = store
        self.checks = tuple(checks)
        # Non-check parts of the tick that want jobs in the tick's one squeue snapshot
        # (objects with `watched_jobs(ctx)`, like the checks that watch jobs).
        self.watchers = tuple(watchers)
        self.env: Mapping[str, str] = dict(env or {})
        self.results: dict[str, CheckResult] = {}
        self._shared: dict[str, tuple[bool, Any]] = {}
        self._lock = threading.Lock()

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """The value of `factory()`, computed once per tick for every caller of `key`.
        A failure is remembered too, so a down controller is asked once, not once per check."""
        with self._lock:
            if key not in self._shared:
                try:
                    self._shared[key] = (True, factory())
                except Exception as exc:  # noqa: BLE001 - re-raised to every caller below
                    self._shared[key] = (False, exc)
            ok, value = self._shared[key]
        if not ok:
            raise value
        return value

    def checks_of(self, cls: type) -> list[Check]:
        return [c for c in self.checks if isinstance(c, cls)]
