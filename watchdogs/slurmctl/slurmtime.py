"""Slurm's time formats: timestamps ("2026-11-22T02:55:18", local time, or N/A/Unknown/None)
and elapsed times ("1-02:03:04", "2:03:04", "0:04")."""
from __future__ import annotations

import re
from datetime import datetime

from watchdogs import humanize

_NO_TIME = ("", "N/A", "Unknown", "None", "(null)", "0")
_ELAPSED = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?")


def aware(moment: datetime) -> datetime:
    """A naive datetime is taken as local time (as Slurm prints it) and made aware."""
    return moment if moment.tzinfo is not None else moment.astimezone()


def parse_timestamp(text: str) -> datetime | None:
    """Slurm prints local times without a zone; None for N/A, Unknown, None."""
    text = text.strip()
    if text in _NO_TIME:
        return None
    try:
        return aware(datetime.fromisoformat(text))
    except ValueError:
        return None


def parse_elapsed(text: str) -> float:
    """"1-02:03:04" -> 93784.0 seconds; anything unparsable (INVALID, N/A) -> 0."""
    match = _ELAPSED.fullmatch(text.strip())
    if not match:
        return 0.0
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def format_clock(moment: datetime, now: datetime) -> str:
    """The date, the time and the zone ("2026-11-30 14:05 UTC"): an alert is read hours later
    and elsewhere. `now` is kept for the callers' sake."""
    del now
    return humanize.moment(aware(moment))
