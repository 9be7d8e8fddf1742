"""Delivery without the state directory: when the state database cannot be written (disk
full, I/O error, corrupt), alerts are decided in memory with the same pure lifecycle and
handed to the channels at once. No outbox, so a message that fails is retried only while
this process lives, and handed to the outbox when the state directory works again.

A channel that fails for a reason of this machine's own disk (`TransportError.local`: the
logfile beside a full state folder) keeps its messages for as long as memory allows
(MAX_PENDING_BYTES), however many ticks that takes: the disk filling is the very event
being reported, and counting its ticks as tries would drop the alert before space returns.
A message delivered late says so, and so does the first one after older ones were dropped.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
MAX_PENDING_BYTES = 4 * 1024 * 1024
"""Memory for undelivered messages: thousands of alerts, never the process's health."""
MAX_TRIES = 5
"""Tries of a channel that fails by itself (a server down); its own disk does not count."""


@dataclass
class _Pending:
    channel: str
    message: Message
    tries: int = 0
    held_since: float | None = None
    """When a local failure (this machine's disk) first kept it back."""
    why: str = ""

    def size(self) -> int:
        return len(self.message.subject) + len(self.message.text) + len(self.message.html or "")

    def as_sent(self, dropped: int) -> Message:
        """The message with what the reader must know about its delay: since when it was
        held, why, and how many older ones memory could not keep."""
        notes = []
        if self.held_since is not None:
            since = datetime.fromtimestamp(self.held_since).strftime("%Y-%m-%d %H:%M:%S")
            notes.append(f"watchdogs: delivered late, held in memory since {since} ({self.why})")
        if dropped:
            notes.append(f"watchdogs: {dropped} older message(s) for channel {self.channel} were dropped: "
                         f"more than {MAX_PENDING_BYTES // (1024 * 1024)} MiB waited in memory")
        if not notes:
            return self.message
        return replace(self.message, text=self.message.text.rstrip("\n") + "\n" + "\n".join(notes) + "\n")


class DirectSink:
    def __init__(self, settings: AlertSettings, channels: Mapping[str, Notifier], templates: Templates,
                 cluster: str, host: str, states: Mapping[str, ItemState] | None = None,
                 cli: str = "watchdogs") -> None:
        self.settings = settings
        self.channels = dict(channels)
        self.templates = templates
        self.cluster = cluster
        self.host = host
        self.cli = cli
        self.states: dict[str, ItemState] = dict(states or {})
        self.pending: list[_Pending] = []
        self.dropped: dict[str, int] = {}
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
            batch = Batch(name, tuple(events), now, self.cluster, self.host, key, cli=self.cli)
            self._queue(_Pending(name, self._render(name, batch)))
        self.flush(now)

    def flush(self, now: datetime, force: bool = False) -> None:
        """Try every waiting message once (a channel that failed is not tried again now)."""
        failed: set[str] = set()
        for entry in list(self.pending):
            if entry.channel in failed:
                continue
            error = deliver(self.channels[entry.channel], entry.as_sent(self.dropped.get(entry.channel, 0)))
            if error is None:
                self._delivered(entry)
                continue
            failed.add(entry.channel)
            if error.local and not error.permanent:
                self._hold(entry, error.message, now)
                continue
            entry.tries += 1
            if error.permanent or entry.tries >= MAX_TRIES:
                self.pending.remove(entry)
                LOG.error("channel %s: dropped %r after %d tries: %s", entry.channel, entry.message.subject,
                          entry.tries, error.message)
            else:
                LOG.warning("channel %s: %s (retried next tick, from memory)", entry.channel, error.message)

    def hand_over(self) -> list[tuple[str, Message]]:
        """Every waiting message, as it would be sent now, taken out of memory: the state
        directory works again, and the outbox keeps them across a restart."""
        moved = [(e.channel, e.as_sent(self.dropped.pop(e.channel, 0))) for e in self.pending]
        self.pending.clear()
        return moved

    def take_back(self, moved: Sequence[tuple[str, Message]]) -> None:
        """The outbox could not take them after all: they wait here again, first in line."""
        self.pending[:0] = [_Pending(channel, message) for channel, message in moved]

    def _delivered(self, entry: _Pending) -> None:
        self.pending.remove(entry)
        self.dropped.pop(entry.channel, None)
        self.delivered += 1
        LOG.info("delivered directly (state directory unusable) via %s: %s", entry.channel,
                 entry.message.subject)

    def _hold(self, entry: _Pending, why: str, now: datetime) -> None:
        """Every message of the channel waits from now on (the others are not tried this
        tick, but they are held back all the same, and say so when they arrive)."""
        if entry.held_since is None:
            LOG.warning("channel %s: %s (kept in memory until it can be written)", entry.channel, why)
        for waiting in self.pending:
            if waiting.channel == entry.channel and waiting.held_since is None:
                waiting.held_since, waiting.why = now.timestamp(), why

    def _queue(self, entry: _Pending) -> None:
        self.pending.append(entry)
        while len(self.pending) > 1 and sum(p.size() for p in self.pending) > MAX_PENDING_BYTES:
            dropped = self.pending.pop(0)
            self.dropped[dropped.channel] = self.dropped.get(dropped.channel, 0) + 1
            LOG.error("channel %s: more than %d MiB of undelivered messages in memory; dropped %r",
                      dropped.channel, MAX_PENDING_BYTES // (1024 * 1024), dropped.message.subject)

    def _render(self, channel: str, batch: Batch) -> Message:
        try:
            return scrub_message(self.channels[channel].render(batch, self.templates),
                                 (s for c in self.channels.values() for s in c.secrets()))
        except Exception:
            LOG.exception("channel %s: rendering failed; sending plain text", channel)
            return plain_message(batch)

