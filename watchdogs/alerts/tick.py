"""One tick's outcomes -> new alert states, log rows, and routed events (one transaction,
run by the sink). Flip detection itself is the pure `lifecycle.decide`."""
from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from watchdogs.alerts import records, silences
from watchdogs.alerts.events import AlertEvent, severity_rank
from watchdogs.alerts.lifecycle import Decision, ItemState, Policy, Reading, decide
from watchdogs.alerts.routing import channels_for, pick_route
from watchdogs.config.model import AlertSettings
from watchdogs.result import Notice, Status
from watchdogs.sink import ItemOutcome


@dataclass(frozen=True)
class Routed:
    event: AlertEvent
    channels: tuple[str, ...]
    silenced_by: int | None = None


def at_time(ts: float, like: datetime) -> datetime:
    """A stored timestamp in the time zone of the tick's clock."""
    return datetime.fromtimestamp(ts, tz=like.tzinfo)


def reading(outcome: ItemOutcome) -> Reading:
    result = outcome.result
    return Reading(result.status, result.summary, outcome.started.timestamp(),
                   result.fingerprint)


def policy(outcome: ItemOutcome, settings: AlertSettings) -> Policy:
    return Policy(outcome.after or settings.after,
                  outcome.repeat_every if outcome.repeat_every is not None else settings.repeat_every)


def to_event(outcome: ItemOutcome, decision: Decision, prev: ItemState, now: datetime) -> AlertEvent:
    result = outcome.result
    resolved = decision.event == "resolved"
    since = prev.since if resolved else decision.state.since
    note = f"was {prev.notified.name}: {prev.summary}" if resolved else decision.note
    if outcome.seen_late is not None and decision.event in ("alert", "changed"):
        note = "; ".join(filter(None, (late_note(outcome.seen_late, now), note)))
    assert decision.event is not None, "only a decision with an event becomes one"
    return AlertEvent(item=outcome.item, state=decision.event, status=result.status,
                      previous=decision.previous, summary=result.summary,
                      since=at_time(since if since is not None else now.timestamp(), now), at=now,
                      kind=outcome.kind, details=tuple(result.details), context=dict(result.context),
                      runbook=outcome.runbook, note=note, log=outcome.log or "")


def late_note(gap: tuple[float, float], now: datetime) -> str:
    """What an alert found by a catch-up run after a gap says: it may be old news."""
    start, end = (at_time(t, now).astimezone() for t in gap)  # the wall clock of the reader
    minutes = max(1, round((gap[1] - gap[0]) / 60))
    return (f"seen late: nothing watched from {start:%H:%M} to {end:%H:%M} ({minutes} min); "
            "this happened at some time in that window")


def notice_event(outcome: ItemOutcome, notice: Notice, now: datetime) -> AlertEvent:
    return AlertEvent(item=outcome.item, state="notice", status=Status.OK, previous=Status.OK,
                      summary=notice.summary, since=now, at=now, kind=outcome.kind,
                      details=notice.details, context=dict(outcome.result.context))


def evaluate(db: sqlite3.Connection, outcomes: Sequence[ItemOutcome], now: datetime,
             settings: AlertSettings, enabled: Sequence[str]) -> list[Routed]:
    """Decide every outcome, save the states, log the events; return what is to be sent."""
    ts = now.timestamp()
    states = records.load_states(db, [o.item for o in outcomes])
    active = silences.listing(db, ts)
    routed: list[Routed] = []
    for outcome in outcomes:
        prev = states.get(outcome.item) or ItemState(outcome.item, kind=outcome.kind)
        silence = silences.silencing(active, outcome.item, ts)
        decision = decide(prev, reading(outcome), policy(outcome, settings), ts, silence is not None)
        states[outcome.item] = decision.state
        route = pick_route(outcome.notify, settings.notify)
        silenced_by = silence.id if silence else None
        for notice in outcome.result.notices:  # news first: a job's end before its alert
            routed.append(Routed(notice_event(outcome, notice, now),
                                 channels_for(route, "notice", "ok", enabled), silenced_by))
        if decision.event is None:
            continue
        event = to_event(outcome, decision, prev, now)
        names = channels_for(route, event.severity, decision.previous.name.lower(), enabled)
        routed.append(Routed(event, names, silenced_by))
    records.save_states(db, list(states.values()))
    records.log_events(db, [(ts, r.event.item, r.event.state, r.event.status.name, r.event.summary,
                             ",".join(r.channels), r.silenced_by) for r in routed])
    return routed


def by_channel(routed: Sequence[Routed]) -> dict[str, list[AlertEvent]]:
    """Unsilenced events grouped per channel, worst first, then by item."""
    groups: dict[str, list[AlertEvent]] = {}
    for entry in routed:
        if entry.silenced_by is None:
            for name in entry.channels:
                groups.setdefault(name, []).append(entry.event)
    for events in groups.values():
        events.sort(key=lambda e: (-severity_rank(e.severity), e.item))
    return groups
