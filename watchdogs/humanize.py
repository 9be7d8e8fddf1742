"""Times, sizes and codes in words, for every message a person reads (alerts, templates).

One place, so every check and template says the same thing the same way:
`6 h 02 min`, `2026-11-23 03:15 UTC`, `61.8 GiB`, `97 %`, `exit 1`,
`killed by signal 9 (KILL)`. (The config's own syntax, "1h30m", stays in watchdogs.units.)
"""
from __future__ import annotations

import signal
from datetime import datetime, timedelta

_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def duration(value: float | timedelta) -> str:
    """Seconds or a timedelta -> "45 s", "12 min 05 s", "6 h 02 min", "3 d 04 h"."""
    total = value.total_seconds() if isinstance(value, timedelta) else float(value)
    seconds = max(0, int(round(total)))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours:02d} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def limit(seconds: float | None) -> str:
    """A Slurm time limit: a duration, or "no limit"."""
    return "no limit" if seconds is None else duration(seconds)


def moment(value: datetime) -> str:
    """Date, time and time zone: "2026-11-23 03:15 UTC". A naive time is taken as local."""
    aware = value if value.tzinfo is not None else value.astimezone()
    zone = aware.strftime("%Z") or aware.strftime("UTC%z")
    return f"{aware:%Y-%m-%d %H:%M} {zone}"


def moment_seconds(value: datetime) -> str:
    """As `moment`, to the second (message headers)."""
    aware = value if value.tzinfo is not None else value.astimezone()
    zone = aware.strftime("%Z") or aware.strftime("UTC%z")
    return f"{aware:%Y-%m-%d %H:%M:%S} {zone}"


def size(num_bytes: float) -> str:
    """Binary units with a space: "512 B", "61.8 GiB"."""
    value = float(num_bytes)
    for unit in _SIZE_UNITS:
        if abs(value) < 1024 or unit == _SIZE_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable: the last unit always returns")


def percent(part: float, whole: float) -> str:
    """"97 %"; "?" when the whole is unknown or zero."""
    if whole <= 0:
        return "?"
    return f"{100.0 * part / whole:.0f} %"


def count(value: int) -> str:
    """41200 -> "41,200"."""
    return f"{value:,}"


def signal_name(number: int) -> str:
    """9 -> "KILL"; an unknown number -> "SIG42"."""
    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        return f"SIG{number}"


def killed_by(number: int) -> str:
    return f"killed by signal {number} ({signal_name(number)})"


def exit_status(code: int, sig: int = 0) -> str:
    """Slurm's ExitCode "code:signal" in words: "exit 1", "killed by signal 9 (KILL)".
    A shell's 128+N means its child was killed by signal N, which is what people need."""
    if sig:
        return killed_by(sig) if code == 0 else f"exit {code} after signal {sig} ({signal_name(sig)})"
    if 128 < code < 160:
        return f"exit {code} (a process killed by signal {code - 128} ({signal_name(code - 128)}))"
    return f"exit {code}"


def slurm_exit(text: str) -> str:
    """"1:0" -> "exit 1", "0:9" -> "killed by signal 9 (KILL)", "" -> ""."""
    code, _, sig = text.strip().partition(":")
    if not code.isdigit():
        return ""
    return exit_status(int(code), int(sig) if sig.isdigit() else 0)


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
