"""The chain instance as the one owner of the state database: it applies the changes other
hosts queue (watchdogs.state.inbox), publishes the read-only view (watchdogs.state.snapshot)
each tick and after each change, and notices a database deleted or replaced under it.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from watchdogs.errors import WatchdogsError
from watchdogs.scheduler.inbox import apply_pending
from watchdogs.sink import ItemOutcome
from watchdogs.state import inbox, snapshot
from watchdogs.state.locking import LockSupport
from watchdogs.state.store import CORRUPT, StateStore, StateUnavailable, state_problem

LOG = logging.getLogger("watchdogs.scheduler")
INBOX_POLL_S = 1.0
"""How often queued changes are looked for: a `silence` from the login node waits this long."""


class StateOwner:
    def __init__(self, state_dir: Path, writer: str, locks: LockSupport,
                 store: Callable[[], StateStore],
                 on_state_error: Callable[[BaseException, datetime], object] | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.writer = writer
        self.locks = locks
        self.store = store
        """The scheduler's store now (the real one, or a scratch one while the folder fails)."""
        self.on_state_error = on_state_error
        self._last_poll = 0.0
        self._told_gone = False

    def _real(self) -> StateStore | None:
        current = self.store()
        return current if Path(current.state_dir) == self.state_dir else None

    def poll(self, now: float) -> list[ItemOutcome]:
        """Queued changes, applied at most every INBOX_POLL_S; the view follows at once."""
        if time.monotonic() - self._last_poll < INBOX_POLL_S:
            return []
        self._last_poll = time.monotonic()
        store = self._real()
        if store is None or not inbox.pending(self.state_dir, fresh=True):
            return []
        try:
            outcomes = apply_pending(store, self.state_dir, self.writer, now)
        except (OSError, WatchdogsError) as exc:
            LOG.error("cannot apply queued changes now (retried): %s", exc)
            return []
        self.publish(now)
        return outcomes

    def tick(self, now: float) -> None:
        store = self._real()
        if store is None:
            return
        gone = store.replaced()
        if gone:
            if not self._told_gone:
                self._told_gone = True
                LOG.error("%s", gone)
                if self.on_state_error is not None:
                    self.on_state_error(StateUnavailable(CORRUPT, self.state_dir, gone),
                                        datetime.fromtimestamp(now, timezone.utc))
            return
        self.publish(now)
        inbox.prune_done(self.state_dir, now)

    def publish(self, now: float) -> None:
        store = self._real()
        if store is None:
            return
        try:
            snapshot.publish(store, self.writer, now)
        except Exception as exc:
            if state_problem(exc) is None and not isinstance(exc, OSError):
                raise
            LOG.warning("cannot write the state view (status shows an older one): %s", exc)
