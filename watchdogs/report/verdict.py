"""What "OK" means for the watchdog itself, decided once for `watchdogs status` (its first
line and Nagios exit code) and the status page's headline.

OK is earned, never assumed (issues 34 and 35). It needs all of:
- someone is watching: an instance ticked within its period plus a short grace
  (watchdogs.state.watching judges it: blind, not ticking, stopped, never started);
- the view that was read is whole and current (watchdogs.state.snapshot.inspect);
- the alerts were handed to their channels: nothing waits in the outbox longer than a few
  ticks;
- and, as before, no open alert.

Each failure is one `Finding` with its own words and status; the verdict is the worst of
them, and the summary lists them worst first. Pure: the facts come in, words go out.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from watchdogs.result import Status
from watchdogs.state.snapshot import ViewProblem
from watchdogs.state.watching import Watching
from watchdogs.units import format_duration

FULL_BELOW = 1024 * 1024
"""Free bytes under which the state folder's filesystem counts as full: SQLite cannot commit
a tick's alerts there, and the scheduler delivers from memory (watchdogs.alerts.direct)."""
STUCK_FLOOR_S = 60.0
"""A message waits at least this long before it counts as stuck: the first retry of a
failed delivery comes 30 s later (watchdogs.alerts.outbox.BASE_BACKOFF)."""


@dataclass(frozen=True)
class Waiting:
    """One undelivered outbox message."""

    channel: str
    created: float
    attempts: int
    last_error: str | None


@dataclass(frozen=True)
class Finding:
    code: str
    """"alerts", "watching", "view", "outbox", "disk"."""
    status: Status
    words: str


@dataclass(frozen=True)
class Verdict:
    status: Status
    findings: tuple[Finding, ...]
    """Worst first (ties in the order alerts, watching, view, outbox)."""

    @property
    def summary(self) -> str:
        return "; ".join(f.words for f in self.findings)

    @property
    def fine(self) -> bool:
        return self.status is Status.OK

    def problems(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status is not Status.OK)


def stuck_after(period: float) -> float:
    """A few ticks: a message older than this was not handed to its channel in time."""
    return max(3 * period, STUCK_FLOOR_S)


def alerts_finding(by_status: Mapping[str, int] | None) -> Finding | None:
    """The open alerts (the rule status always had): the worst of them. None: not known."""
    if by_status is None:
        return None
    opened = sum(by_status.values())
    named = [(Status[k] if k in Status.__members__ else Status.UNKNOWN, n) for k, n in by_status.items()]
    ranked = sorted(named, key=lambda sn: -sn[0].severity)
    worst = ranked[0][0] if ranked else Status.OK
    counts = ", ".join(f"{n} {s.name}" for s, n in ranked)
    words = f"{opened} open alert{'s' if opened != 1 else ''}" + (f" ({counts})" if counts else "")
    return Finding("alerts", worst, words)


def view_finding(problem: ViewProblem | None) -> Finding | None:
    """An unusable view: what it says cannot be known (UNKNOWN); not a regular file at all,
    something replaced it (CRITICAL)."""
    if problem is None:
        return None
    status = Status.CRITICAL if problem.replaced else Status.UNKNOWN
    return Finding("view", status, f"state view unusable: {problem.words}")


def outbox_finding(waiting: Sequence[Waiting], channels: Sequence[str], now: float,
                   period: float) -> Finding | None:
    """Messages not handed to their channel for a few ticks: WARNING; CRITICAL when every
    channel has such a message (no alert reaches anyone). `channels`: the working ones."""
    late = [w for w in waiting if now - w.created > stuck_after(period)]
    if not late:
        return None
    oldest = min(late, key=lambda w: w.created)
    stuck = {w.channel for w in late}
    everywhere = bool(channels) and set(channels) <= stuck
    error = f", last error: {oldest.last_error}" if oldest.last_error else ""
    words = (f"outbox stuck: {len(late)} alert message{'s' if len(late) != 1 else ''} not handed to "
             f"{', '.join(sorted(stuck))} for up to {format_duration(now - oldest.created)} "
             f"({oldest.attempts} attempt(s){error})"
             + ("; no channel delivers: alerts reach nobody" if everywhere else "")
             + " (`watchdogs alerts` lists them)")
    return Finding("outbox", Status.CRITICAL if everywhere else Status.WARNING, words)


def disk_finding(free: int | None) -> Finding | None:
    """The state folder's filesystem full: the view cannot be current and nothing durable
    records the alerts; the scheduler keeps them in memory until space returns."""
    if free is None or free >= FULL_BELOW:
        return None
    return Finding("disk", Status.CRITICAL,
                   f"state folder's filesystem full ({free:,} bytes free): the scheduler delivers alerts "
                   "from memory and keeps what a channel cannot take yet; this view may be old")


def watching_finding(watching: Watching) -> Finding:
    return Finding("watching", watching.status, watching.headline)


def verdict(watching: Watching, view: ViewProblem | None, by_status: Mapping[str, int] | None,
            waiting: Sequence[Waiting], channels: Sequence[str], now: float, period: float,
            state_free: int | None = None) -> Verdict:
    """The worst of every finding. With the view unusable, the open alerts are not known
    and are left out (the view's finding says why). `state_free`: bytes free on the state
    folder's filesystem (None: not known)."""
    found = [alerts_finding(None if view is not None else by_status), watching_finding(watching),
             view_finding(view), outbox_finding(waiting, channels, now, period), disk_finding(state_free)]
    findings = [f for f in found if f is not None]
    order = sorted(findings, key=lambda f: -f.status.severity)  # stable: ties keep the order above
    worst = order[0].status if order else Status.OK
    return Verdict(worst, tuple(order))
