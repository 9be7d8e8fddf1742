"""Delivery without the state directory: when the state database cannot be written (disk
full, I/O error, corrupt), alerts are decided in memory with the same pure lifecycle and
handed to the channels at once. No outbox, so a message that fails is retried only while
this process lives (a few times, then dropped with a log line): better than silence.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from notifiers.base import Message, Notifier, scrub_message
from notifiers.render import Templates, plain_message
from watchdogs.alerts.channels import deliver
from watchdogs.alerts.events import AlertEvent, Batch, severity_rank
from watchdogs.alerts.lifecycle import ItemState, decide
from watchdogs.alerts.routing import channels_for, pick_route
from watchdogs.alerts.tick import policy, reading, to_event
from watchdogs.config.model import AlertSettings
from watchdogs.sink import ItemOutcome

LOG = logging.getLogger("watchdogs.alerts")
MAX_PENDING = 50
MAX_TRIES = 5


@dataclass
class _Pending:
    channel: str
    message: Message
    tries: int = 0


class DirectSink:
    def __init__(self, settings: AlertSettings, channels: Mapping[str, Notifier], templates: Templates,
                 cluster: str, host: str, states: Mapping[str, ItemState] | None = None) -> None:
        self.settings = settings
        self.channels = dict(channels)
        self.templates = templates
        self.cluster = cluster
        self.host = host
        self.states: dict[str, ItemState] = dict(states or {})
        self.pending: list[_Pending] = []
        self.delivered = 0

    def handle(self, outcomes: Sequence[ItemOutcome], now: datetime) -> None:
        groups: dict[str, list[AlertEvent]] = {}
        ts = now.timestamp()
        for outcome in outcomes:
            prev = self.states.get(outcome.item) or ItemState(outcome.item, kind=outcome.kind)
            decision = decide(prev, reading(outcome), policy(outcome, self.settings), ts)
            self.states[outcome.item] = decision.state
            if decision.event is None:
                continue
            event = to_event(outcome, decision, prev, now)
            route = pick_route(outcome.notify, self.settings.notify)
            previous = decision.previous.name.lower()
            for name in channels_for(route, event.severity, previous, list(self.channels)):
                groups.setdefault(name, []).append(event)
        for name, events in groups.items():
            events.sort(key=lambda e: (-severity_rank(e.severity), e.item))
            key = f"wd-direct-{name}-{int(ts * 1000)}"
            batch = Batch(name, tuple(events), now, self.cluster, self.host, key)
            self._queue(_Pending(name, self._render(name, batch)))
        self.flush(now)

    def flush(self, now: datetime, force: bool = False) -> None:
        """Try every waiting message once (a channel that failed is not tried again now)."""
        failed: set[str] = set()
        for entry in list(self.pending):
            if entry.channel in failed:
                continue
            error = deliver(self.channels[entry.channel], entry.message)
            if error is None:
                self.pending.remove(entry)
                self.delivered += 1
                LOG.info("delivered directly (state directory unusable) via %s: %s", entry.channel,
                         entry.message.subject)
                continue
            entry.tries += 1
            failed.add(entry.channel)
            if error.permanent or entry.tries >= MAX_TRIES:
                self.pending.remove(entry)
                LOG.error("channel %s: dropped %r after %d tries: %s", entry.channel, entry.message.subject,
                          entry.tries, error.message)
            else:
                LOG.warning("channel %s: %s (retried next tick, from memory)", entry.channel, error.message)

    def _queue(self, entry: _Pending) -> None:
        self.pending.append(entry)
        if len(self.pending) > MAX_PENDING:
            dropped = self.pending.pop(0)
            LOG.error("channel %s: too many undelivered messages in memory; dropped %r", dropped.channel,
                      dropped.message.subject)

    def _render(self, channel: str, batch: Batch) -> Message:
        try:
            return scrub_message(self.channels[channel].render(batch, self.templates),
                                 (s for c in self.channels.values() for s in c.secrets()))
        except Exception:
            LOG.exception("channel %s: rendering failed; sending plain text", channel)
            return plain_message(batch)

