"""The ResultSink the scheduler talks to: `handle` records and enqueues (one transaction per
tick), `flush` delivers from the outbox.

Exactly once, and its one honest gap: an item is marked delivered in the database right
after its channel accepted it. A crash (kill -9, node loss) after the remote side accepted
but before that mark is committed re-sends the message on restart. The window is one
SQLite commit wide; receivers can drop the copy by the idempotency key, which every channel
carries (email Message-ID, webhook Idempotency-Key header and `id`, Slack footer/metadata).
"""
from __future__ import annotations

import hashlib
import logging
import os
import socket
import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Literal

from notifiers.base import Message, Notifier, TransportError, scrub_message
from notifiers.render import Templates, plain_message
from watchdogs import humanize
from watchdogs.alerts import health, outbox, records, schema, silences
from watchdogs.alerts.channels import deliver
from watchdogs.alerts.events import AlertEvent, Batch, cli_for
from watchdogs.alerts.tick import at_time, by_channel, evaluate
from watchdogs.config.model import Config
from watchdogs.result import Status
from watchdogs.sink import ItemOutcome
from watchdogs.slurmctl.clustername import cluster_name
from watchdogs.state.store import StateStore, StateUnavailable, state_problem

LOG = logging.getLogger("watchdogs.alerts")
KEEP_DELIVERED = 7 * 86400.0
KEEP_LOG = 30 * 86400.0


def message_key(channel: str, now: datetime, events: Sequence[AlertEvent]) -> str:
    """Deterministic per (channel, tick, events): handling the same tick twice queues once."""
    text = "\n".join([channel, now.isoformat(), *(f"{e.item}\t{e.state}\t{e.status}" for e in events)])
    return "wd-" + hashlib.sha256(text.encode()).hexdigest()[:24]


class AlertSink:
    def __init__(self, config: Config, store: StateStore, channels: Mapping[str, Notifier],
                 templates: Templates | None = None, host: str | None = None) -> None:
        self.config = config
        self.store = schema.ensure(store)
        self.channels = dict(channels)
        self.templates = templates or Templates(config.alerts.templates)
        self.host = host or socket.gethostname()
        self.cluster = cluster_name(config.alerts.cluster, self.host)
        self.owner = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.cli = cli_for(str(config.path), os.environ.get("WATCHDOGS_CONFIG"))

    def __repr__(self) -> str:
        return f"<AlertSink channels={sorted(self.channels)}>"

    # -- handle: record + enqueue, one transaction -------------------------------------------

    def handle(self, outcomes: Sequence[ItemOutcome], now: datetime) -> None:
        if not outcomes:
            return
        try:
            with self.store.transaction() as db:
                routed = evaluate(db, outcomes, now, self.config.alerts, list(self.channels))
                for channel, events in by_channel(routed).items():
                    self._enqueue(db, channel, events, now)
        except sqlite3.Error as exc:
            # Nothing was committed. A full, broken or corrupt state directory is the caller's
            # to handle (it delivers these outcomes directly); anything else (a lock held too
            # long): the next tick's readings decide again, so nothing is lost for good.
            _raise_if_unusable(self.store, exc)
            LOG.error("alert state not recorded this tick (state database: %s)", exc)

    def _enqueue(self, db: sqlite3.Connection, channel: str, events: Sequence[AlertEvent],
                 now: datetime) -> None:
        batch = Batch(channel, tuple(events), now, self.cluster, self.host,
                      message_key(channel, now, events), cli=self.cli)
        outbox.enqueue(db, channel, self._render(channel, batch), now.timestamp())

    def _render(self, channel: str, batch: Batch) -> Message:
        """A broken template or channel plugin must not cost the alert: plain text instead."""
        try:
            message = scrub_message(self.channels[channel].render(batch, self.templates),
                                    (s for c in self.channels.values() for s in c.secrets()))
            outbox.encode(message)  # a plugin's non-JSON `extra` must fail here, not in the tick
            return message
        except Exception:
            LOG.exception("channel %s: rendering failed; sending plain text", channel)
            return plain_message(batch)

    def adopt(self, messages: Sequence[tuple[str, Message]], now: datetime) -> None:
        """Rendered messages that waited elsewhere (in memory while the state directory was
        full) join the outbox in one transaction: all of them or, on error, none."""
        if not messages:
            return
        try:
            with self.store.transaction() as db:
                for channel, message in messages:
                    outbox.enqueue(db, channel, message, now.timestamp())
        except sqlite3.Error as exc:
            _raise_if_unusable(self.store, exc)
            raise

    # -- flush: deliver ----------------------------------------------------------------------

    def flush(self, now: datetime, force: bool = False) -> None:
        try:
            failed, more = self._deliver(now, force, set())
            if self._announce_channel_health(now) or more:
                self._deliver(now, False, failed)  # the news about channels, at once
            self._prune(now.timestamp())
        except sqlite3.Error as exc:
            _raise_if_unusable(self.store, exc)
            LOG.error("outbox not flushed this tick (state database: %s)", exc)

    def _deliver(self, now: datetime, force: bool, failed: set[str]) -> tuple[set[str], bool]:
        """Try due items, oldest first. A channel that fails transiently is not tried again
        in this flush: 50 queued messages to a dead SMTP server must not cost 50 timeouts.
        Returns the failed channels, and whether a recovery notice was queued meanwhile."""
        ts = now.timestamp()
        failed, more = set(failed), False
        for item in outbox.due(self.store.connection(), ts, force):
            notifier = self.channels.get(item.channel)
            if item.channel in failed or notifier is None:
                continue
            if not self._claim(item, notifier, ts):
                continue
            error = deliver(notifier, replace(item.message, done=item.done))
            more = self._settle(item, error, now) or more
            if error is not None and not error.permanent:
                failed.add(item.channel)
        return failed, more

    def _claim(self, item: outbox.OutboxItem, notifier: Notifier, ts: float) -> bool:
        with self.store.transaction() as db:
            return outbox.claim(db, item.id, self.owner, ts, ts + notifier.send_budget())

    def _settle(self, item: outbox.OutboxItem, error: TransportError | None, now: datetime) -> bool:
        """Record the attempt right away: after success, this commit is all that stands
        between us and a duplicate on a crash. True if a "channel delivers again" notice
        was queued."""
        ts = now.timestamp()
        told = False
        with self.store.transaction() as db:
            if error is None:
                outbox.mark_delivered(db, item.id, ts)
                recovered = health.record_success(db, item.channel, ts)
            else:
                wait = outbox.backoff(item.attempts + 1, error.permanent, error.retry_after)
                outbox.mark_failed(db, item, ts, error.message, wait, error.done)
                health.record_failure(db, item.channel, ts, error.message)
                recovered = None
                if error.permanent:
                    told = self._announce_broken(db, item.channel, now)
            if recovered is not None:
                self._enqueue_channel_event(db, recovered, now, "resolved")
        if error is None:
            LOG.info("delivered %s via %s: %s", item.key, item.channel, item.message.subject)
        else:
            kind = "permanent" if error.permanent else "will retry"
            LOG.warning("channel %s: %s (%s; next try in %s s)", item.channel, error.message, kind,
                        int(outbox.backoff(item.attempts + 1, error.permanent, error.retry_after)))
        return recovered is not None or told

    def _announce_broken(self, db: sqlite3.Connection, channel: str, now: datetime) -> bool:
        """An error no retry mends (a refused address, a header as configured): the others
        are told now, once, instead of after `channel_down_after` of retries."""
        found = next((h for h in health.listing(db) if h.channel == channel), None)
        if found is None or found.down_alerted:
            return False
        self._enqueue_channel_event(db, found, now, "alert")
        health.mark_announced(db, channel)
        return True

    # -- channel health ----------------------------------------------------------------------

    def _announce_channel_health(self, now: datetime) -> bool:
        """Channels failing longer than channel_down_after: tell the others, once."""
        ts = now.timestamp()
        with self.store.transaction() as db:
            down = health.to_announce(db, ts, self.config.alerts.channel_down_after)
            for entry in down:
                self._enqueue_channel_event(db, entry, now, "alert")
                health.mark_announced(db, entry.channel)
        return bool(down)

    def _enqueue_channel_event(self, db: sqlite3.Connection, entry: health.Health, now: datetime,
                               state: Literal["alert", "resolved"]) -> None:
        failing_since = at_time(entry.failing_since or now.timestamp(), now)
        waiting = db.execute("SELECT COUNT(*) FROM outbox WHERE channel = ? AND delivered IS NULL",
                             (entry.channel,)).fetchone()[0]
        notifier = self.channels.get(entry.channel)
        kind = notifier.type_name if notifier else "?"
        summary = (f"alert channel {entry.channel} ({kind}) failing since {humanize.moment(failing_since)}: "
                   f"{entry.last_error}" if state == "alert"
                   else f"alert channel {entry.channel} ({kind}) delivers again")
        event = AlertEvent(item=f"channel:{entry.channel}", state=state,
                           status=Status.CRITICAL if state == "alert" else Status.OK,
                           previous=Status.OK if state == "alert" else Status.CRITICAL,
                           summary=summary, since=failing_since, at=now, kind="channel",
                           note=f"{waiting} message(s) waiting for it in the outbox")
        records.log_events(db, [(now.timestamp(), event.item, state, event.status.name, summary, "", None)])
        for other in self.channels:
            if other != entry.channel:
                self._enqueue(db, other, [event], now)

    def _prune(self, ts: float) -> None:
        with self.store.transaction() as db:
            outbox.prune(db, ts - KEEP_DELIVERED)
            records.prune(db, ts - KEEP_LOG)
            silences.prune(db, ts - KEEP_LOG)


def _raise_if_unusable(store: StateStore, exc: sqlite3.Error) -> None:
    kind = state_problem(exc)
    if kind is not None:
        raise StateUnavailable(kind, store.state_dir, str(exc)) from exc
