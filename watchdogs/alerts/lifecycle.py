"""Flip detection: what one new reading of an item means for its alert. Pure functions of
(previous state, reading, policy, now); no clock, no database.

Healthchecks-style: people hear about a change (OK -> bad, a severity change, a different
thing broken under the same status, recovery), not every reading; a repeat every
`repeat_every` while still failing unless acknowledged; `after` consecutive bad readings
before the first alert (and before a severity change), so a flapping check stays quiet.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from watchdogs.alerts.events import EventState
from watchdogs.result import Status


@dataclass(frozen=True)
class ItemState:
    item: str
    kind: str = "check"
    status: Status = Status.OK
    summary: str = ""
    since: float | None = None
    """When the current bad streak began (None while OK)."""
    bad_streak: int = 0
    status_streak: int = 0
    fingerprint: str = ""
    notified: Status = Status.OK
    """The status last announced; not OK means an alert is open."""
    notified_fingerprint: str = ""
    last_notified: float | None = None
    acked_at: float | None = None
    acked_by: str | None = None
    muted: bool = False
    """An announcement was withheld by a silence: say it once the silence ends."""
    updated: float = 0.0

    @property
    def open(self) -> bool:
        return self.notified is not Status.OK


@dataclass(frozen=True)
class Reading:
    status: Status
    summary: str
    started: float
    fingerprint: str = ""


@dataclass(frozen=True)
class Policy:
    after: int = 1
    repeat_every: float = 4 * 3600.0


@dataclass(frozen=True)
class Decision:
    state: ItemState
    event: EventState | None
    """alert, changed, repeat, resolved, or None."""
    previous: Status
    """What had been announced before this decision."""
    silenced: bool = False
    note: str = ""


def decide(prev: ItemState, reading: Reading, policy: Policy, now: float, silenced: bool = False) -> Decision:
    state = observe(prev, reading, now)
    event, note = _event(prev, state, policy, now, silenced)
    if event is None:
        return Decision(state, None, prev.notified)
    return Decision(announce(state, event, now, silenced), event, prev.notified, silenced, note)


def observe(prev: ItemState, reading: Reading, now: float) -> ItemState:
    """Fold one reading into the streak counters."""
    bad, was_bad = reading.status is not Status.OK, prev.status is not Status.OK
    since = (prev.since if was_bad and prev.since is not None else reading.started) if bad else None
    return replace(prev, status=reading.status, summary=reading.summary, fingerprint=reading.fingerprint,
                   since=since, bad_streak=prev.bad_streak + 1 if bad and was_bad else int(bad),
                   status_streak=prev.status_streak + 1 if reading.status is prev.status else 1,
                   updated=now)


def _event(prev: ItemState, state: ItemState, policy: Policy, now: float,
           silenced: bool) -> tuple[EventState | None, str]:
    if state.status is Status.OK:
        return ("resolved", "") if prev.open else (None, "")
    if not prev.open:
        return ("alert", "") if state.bad_streak >= policy.after else (None, "")
    if state.status is not prev.notified:
        return ("changed", "") if state.status_streak >= policy.after else (None, "")
    if state.fingerprint != prev.notified_fingerprint:
        return "changed", "what is failing changed"
    if prev.muted and not silenced:
        return "repeat", "a silence ended"
    due = prev.last_notified is None or now - prev.last_notified >= policy.repeat_every
    return ("repeat", "") if due and prev.acked_at is None else (None, "")


def announce(state: ItemState, event: EventState, now: float, silenced: bool) -> ItemState:
    """The state once `event` is announced (or withheld by a silence, which counts as
    announced so the lifecycle moves on, plus `muted` so the news goes out when it ends)."""
    if event == "resolved":
        return replace(state, notified=Status.OK, notified_fingerprint="", last_notified=now,
                       acked_at=None, acked_by=None, muted=False)
    keep_ack = event == "repeat"
    return replace(state, notified=state.status, notified_fingerprint=state.fingerprint,
                   last_notified=now, muted=silenced,
                   acked_at=state.acked_at if keep_ack else None,
                   acked_by=state.acked_by if keep_ack else None)
