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

from watchdogs.alerts import selfalerts
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
        self._inbox_said: dict[str, bool] = {"rejected": True, "refused": True}
        """Whether an inbox alert may be open (so its end is said): True at start, as an
        earlier instance may have left one open."""
        self._first_look = True
        self._stuck: frozenset[str] = frozenset()
        """Entries that could not be moved aside, already told: skipped, not told again."""

    def _real(self) -> StateStore | None:
        current = self.store()
        return current if Path(current.state_dir) == self.state_dir else None

    def poll(self, now: float) -> list[ItemOutcome]:
        """Queued changes, applied at most every INBOX_POLL_S; the view follows at once."""
        if time.monotonic() - self._last_poll < INBOX_POLL_S:
            return []
        self._last_poll = time.monotonic()
        store = self._real()
        if store is None:
            return []
        queue = inbox.take(self.state_dir, fresh=True, now=now)
        try:
            told = self._inbox_news(queue, now)
        except Exception:  # telling about the inbox must never stop applying what is in it
            LOG.exception("cannot tell what was set aside in the inbox")
            told = []
        if not queue.commands:
            return told
        try:
            outcomes = apply_pending(store, self.state_dir, self.writer, now, queue=queue)
        except (OSError, WatchdogsError) as exc:
            LOG.error("cannot apply queued changes now (retried): %s", exc)
            return told
        self.publish(now)
        return told + outcomes

    def _inbox_news(self, queue: inbox.Queue, now: float) -> list[ItemOutcome]:
        """The inbox's own alerts: a folder others can write (CRITICAL, nothing applied),
        and entries set aside (one WARNING naming each and its owner, open while
        inbox/rejected/ holds any); each RESOLVED once cleared."""
        when = datetime.fromtimestamp(now, timezone.utc)
        told: list[ItemOutcome] = []
        if queue.refused:
            if not self._inbox_said["refused"]:
                LOG.error("%s", queue.refused)
            self._inbox_said["refused"] = True
            told.append(selfalerts.inbox_refused(queue.refused, str(inbox.folder(self.state_dir)), when))
        elif self._inbox_said["refused"]:
            self._inbox_said["refused"] = False
            told.append(selfalerts.inbox_refused(None, str(inbox.folder(self.state_dir)), when))
        new = [e for e in queue.set_aside if e.moved_to is not None or e.name not in self._stuck]
        if self._first_look:  # what was set aside before this instance (and not told) is told now
            self._first_look = False
            new = new or inbox.set_aside_earlier(self.state_dir)
        self._stuck = frozenset(e.name for e in queue.set_aside if e.moved_to is None)
        for entry in new:
            LOG.warning("inbox entry set aside: %s", entry)
        if new:
            self._inbox_said["rejected"] = True
            told.append(selfalerts.inbox_rejected([str(e) for e in new], str(inbox.folder(self.state_dir)),
                                                  when, inbox.in_words(new)))
        elif self._inbox_said["rejected"] and not self._stuck and not queue.refused \
                and not inbox.rejected_entries(self.state_dir):
            self._inbox_said["rejected"] = False
            told.append(selfalerts.inbox_rejected([], str(inbox.folder(self.state_dir)), when))
        return told

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
