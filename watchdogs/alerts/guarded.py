"""The sink the scheduler talks to: the durable AlertSink while the state directory works,
direct in-memory delivery (`DirectSink`) while it does not, and the news of the switch
("state directory full/corrupt", then "can be written again") sent at once, directly.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from watchdogs.alerts import selfalerts
from watchdogs.alerts.direct import DirectSink
from watchdogs.alerts.sink import AlertSink
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateUnavailable, state_problem

LOG = logging.getLogger("watchdogs.alerts")
PROBE = ("watchdogs", "state-probe")


class GuardedSink:
    def __init__(self, stored: AlertSink | None, direct: DirectSink, state_dir: Path,
                 reopen: Callable[[], AlertSink] | None = None,
                 on_change: Callable[[str | None, str], None] | None = None,
                 problem: tuple[str, str] | None = None) -> None:
        """`reopen` builds a new AlertSink once the directory works again (when there was
        none at start); `on_change(kind or None, detail)` hears every switch (the dead
        man's switch sends /fail with it)."""
        self.stored = stored
        self.direct = direct
        self.state_dir = state_dir
        self.reopen = reopen
        self.on_change = on_change
        self.problem: tuple[str, str] | None = None
        self._pending_problem = problem
        self._store_fault: str | None = None
        """The alert store's last unexpected error (a bug, not the disk), until it takes outcomes again."""

    @property
    def channels(self) -> Mapping[str, object]:
        return self.direct.channels

    def __repr__(self) -> str:
        return f"<GuardedSink channels={sorted(self.direct.channels)} problem={self.problem}>"

    def handle(self, outcomes: Sequence[ItemOutcome], now: datetime) -> None:
        if self._pending_problem is not None:
            kind, detail = self._pending_problem
            self._pending_problem = None
            self.failed(kind, detail, now)
        if self.problem is None and self.stored is not None:
            # An alert opened from memory during the outage is closed from memory too: the
            # database never heard of it, and its RESOLVED must not be lost.
            carried = {item for item, state in self.direct.states.items() if state.open}
            try:
                self.stored.handle([o for o in outcomes if o.item not in carried], now)
                outcomes = [o for o in outcomes if o.item in carried]
            except StateUnavailable as exc:
                self.failed(exc.kind, exc.detail, now)
            except Exception as exc:  # a fault of ours, not of the disk: the alerts go out from memory
                LOG.exception("the alert store failed to take %d outcomes: delivering them directly",
                              len(outcomes))
                self._store_fault = f"{type(exc).__name__}: {exc}"
                outcomes = [*outcomes, selfalerts.store_failed(self._store_fault, len(outcomes), now,
                                                               list(self.direct.channels))]
            else:
                if self._store_fault is not None:
                    self._store_fault = None
                    outcomes = [*outcomes, selfalerts.store_ok(now, list(self.direct.channels))]
        if outcomes:
            self.direct.handle(outcomes, now)

    def flush(self, now: datetime, force: bool = False) -> None:
        if self._pending_problem is not None:
            self.handle([], now)
        if self.problem is not None:
            self._probe(now)
        if self.problem is None and self.stored is not None:
            try:
                self.stored.flush(now, force)
            except StateUnavailable as exc:
                self.failed(exc.kind, exc.detail, now)
        self.direct.flush(now, force)

    def state_error(self, exc: BaseException, now: datetime) -> str | None:
        """Another part of the scheduler could not write the state: switch over. Returns the
        kind (full, corrupt, unwritable), or None if `exc` is not about the state directory."""
        kind = state_problem(exc)
        if kind is not None:
            self.failed(kind, exc.detail if isinstance(exc, StateUnavailable) else str(exc), now)
        return kind

    def failed(self, kind: str, detail: str, now: datetime) -> None:
        if self.problem is not None and self.problem[0] == kind:
            return
        LOG.error("state directory %s %s (%s): delivering alerts directly from memory", self.state_dir, kind,
                  detail)
        self.problem = (kind, detail)
        self.direct.handle([selfalerts.state_broken(kind, detail, str(self.state_dir), now,
                                                    list(self.direct.channels))], now)
        if self.on_change is not None:
            self.on_change(kind, detail)

    def _probe(self, now: datetime) -> None:
        """One small write: does the state directory work again?"""
        try:
            if self.stored is None and self.reopen is not None:
                self.stored = self.reopen()
            if self.stored is None:
                return
            self.stored.store.kv_put(*PROBE, now.timestamp())
        except Exception as exc:
            if state_problem(exc) is None and not isinstance(exc, StateUnavailable):
                LOG.exception("state probe failed")
            return
        LOG.warning("state directory %s can be written again: back to the outbox", self.state_dir)
        self.problem = None
        self._hand_over(now)
        self.direct.handle([selfalerts.state_ok(now, list(self.direct.channels))], now)
        if self.on_change is not None:
            self.on_change(None, "the state directory can be written again")

    def _hand_over(self, now: datetime) -> None:
        """What still waits in memory goes into the outbox: from now on it survives a restart
        and is retried with the outbox's backoff like any other message."""
        if self.stored is None:
            return
        moved = self.direct.hand_over()
        try:
            self.stored.adopt(moved, now)
        except Exception as exc:
            if state_problem(exc) is None and not isinstance(exc, StateUnavailable):
                LOG.exception("handing %d message(s) from memory to the outbox failed", len(moved))
            self.direct.take_back(moved)
            return
        if moved:
            LOG.warning("%d message(s) waiting in memory handed to the outbox", len(moved))
