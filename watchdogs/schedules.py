"""When an item runs: a fixed interval, a crontab expression, or once per scheduler start.

Everything here is a pure function of its inputs (previous run, now, time zone), as
APScheduler's own triggers are (`get_next_fire_time(previous, now)`); the clock is the
caller's. Crontab expressions follow cron, not APScheduler 3: day-of-week 0 and 7 are
Sunday, and when both day-of-month and day-of-week are restricted, either one matching
is enough.

In the core layer (docs/architecture.md, "Layers"): drop-in discovery and the scheduler both
import it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING

from watchdogs import units

if TYPE_CHECKING:
    from apscheduler.triggers.base import BaseTrigger

# APScheduler is imported by the functions that build triggers, not here: it pulls in
# asyncio (~30 modules), and `watchdogs status` or `validate` of interval schedules
# needs none of it (tests/foundation/test_cli_imports.py).

SHORTHANDS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
SPEC_EXPECTED = ('5 cron fields ("*/5 * * * *"), @hourly, @daily, @weekly, @monthly, @yearly, '
                 '@reboot, or "@every 10m"')
_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DOW_PART = re.compile(r"(\*|[0-7a-z]{1,3})(?:-([0-7a-z]{1,3}))?(?:/(\d+))?")


@dataclass(frozen=True)
class Schedule:
    """`kind` is "interval" (every `seconds`), "cron" (`expr`, 5 fields) or "reboot"."""

    kind: str
    seconds: float = 0.0
    expr: str = ""

    def describe(self) -> str:
        if self.kind == "interval":
            return f"every {units.format_duration(self.seconds)}"
        if self.kind == "cron":
            return f"cron {self.expr}"
        return "@reboot"


def every(seconds: float) -> Schedule:
    if seconds <= 0:
        raise ValueError("a period longer than 0s")
    return Schedule("interval", seconds=float(seconds))


def parse_spec(text: str) -> Schedule:
    """A crontab schedule: 5 fields, an @shorthand, @reboot or "@every <duration>".
    Raises ValueError naming what was expected."""
    text = " ".join(text.split())
    if text == "@reboot":
        return Schedule("reboot")
    if text.startswith("@every "):
        return every(units.parse_duration(text[len("@every "):]))
    expr = SHORTHANDS.get(text, text)
    if expr.startswith("@") or len(expr.split()) != 5:
        raise ValueError(SPEC_EXPECTED)
    cron_trigger(expr, timezone.utc)  # raises ValueError for a bad field
    return Schedule("cron", expr=expr)


def cron_day_of_week(field: str) -> str:
    """Crontab's day-of-week field (0 or 7 = Sunday, names allowed) as APScheduler 3 names,
    whose numbers start at Monday."""
    if field == "*":
        return "*"
    days: set[int] = set()
    for part in field.lower().split(","):
        match = _DOW_PART.fullmatch(part)
        if not match:
            raise ValueError(f"day of week {field!r}: expected 0-7, sun-sat, ranges and steps")
        first, last, step = match.groups()
        if first == "*":
            lo, hi = 0, 6
        else:
            lo = _dow_number(first)
            hi = _dow_number(last) if last else (6 if step else lo)
        if hi < lo:
            raise ValueError(f"day of week {field!r}: a range must go upwards")
        days.update(d % 7 for d in range(lo, hi + 1, int(step or 1)))
    return ",".join(_DOW_NAMES[d] for d in sorted(days))


def _dow_number(token: str) -> int:
    if token.isdigit() and 0 <= int(token) <= 7:
        return int(token)
    if token in _DOW_NAMES:
        return _DOW_NAMES.index(token)
    raise ValueError(f"day of week {token!r}: expected 0-7 or sun-sat")


def cron_trigger(expr: str, tz: tzinfo) -> BaseTrigger:
    from apscheduler.triggers.combining import OrTrigger
    from apscheduler.triggers.cron import CronTrigger

    minute, hour, day, month, dow = expr.split()
    def build(day_field: str, dow_field: str) -> CronTrigger:
        return CronTrigger(minute=minute, hour=hour, day=day_field, month=month,
                           day_of_week=cron_day_of_week(dow_field), timezone=tz)
    if day != "*" and dow != "*":
        # cron runs when EITHER day field matches; a CronTrigger would need both.
        return OrTrigger([build(day, "*"), build("*", dow)])
    return build(day, dow)


def make_trigger(schedule: Schedule, first: datetime, tz: tzinfo) -> BaseTrigger:
    """The APScheduler trigger whose first fire time is `first` (from `first_run`)."""
    from apscheduler.triggers.date import DateTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    if schedule.kind == "interval":
        return IntervalTrigger(seconds=schedule.seconds, start_date=first, timezone=timezone.utc)
    if schedule.kind == "cron":
        return cron_trigger(schedule.expr, tz)
    return DateTrigger(run_date=first, timezone=timezone.utc)


def first_run(schedule: Schedule, anchor: datetime | None, now: datetime, tz: tzinfo) -> datetime:
    """Anacron-style catch-up. `anchor` is the start of the last *completed* run (None if it
    never completed). Never run, or overdue by any number of periods -> now, once."""
    if anchor is None or schedule.kind == "reboot":
        return now
    if schedule.kind == "interval":
        due = anchor + timedelta(seconds=schedule.seconds)
    else:
        due = cron_trigger(schedule.expr, tz).get_next_fire_time(None, anchor + timedelta(seconds=1))
        if due is None:
            return now
    return now if due <= now else due
