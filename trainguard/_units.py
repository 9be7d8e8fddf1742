"""Durations and sizes in settings: trainguard's own copy of the two parsers it needs
(the same grammar as the watchdogs service's `units`, which trainguard must not import)."""
from __future__ import annotations

import re

DURATION_EXPECTED = 'a duration such as "90s", "5m", "2h", "1d" or "1h30m"'
SIZE_EXPECTED = 'a size such as "500GiB", "400TiB", "1.5TB", "800G" or a whole number of bytes'

_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_BINARY = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50, "e": 2**60}
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15, "e": 10**18}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?b?)", re.IGNORECASE)


def parse_duration(value: object) -> float:
    """"1h30m" -> 5400.0 seconds. Strings only: a bare number is ambiguous."""
    if not isinstance(value, str):
        raise ValueError(DURATION_EXPECTED)
    text = value.strip().lower()
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos and text[pos:match.start()].strip():
            raise ValueError(DURATION_EXPECTED)
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos == 0 or text[pos:].strip():
        raise ValueError(DURATION_EXPECTED)
    return total


def parse_size(value: object) -> int:
    """Bytes. "GiB"/"G" are binary (as du and lfs print them), "GB" is decimal."""
    if isinstance(value, bool):
        raise ValueError(SIZE_EXPECTED)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(SIZE_EXPECTED)
        return value
    if not isinstance(value, str):
        raise ValueError(SIZE_EXPECTED)
    match = _SIZE.fullmatch(value.strip())
    if not match:
        raise ValueError(SIZE_EXPECTED)
    number, prefix, suffix = float(match.group(1)), match.group(2).lower(), match.group(3).lower()
    if suffix == "b" and prefix:
        return int(number * _DECIMAL[prefix])
    if suffix == "i":
        raise ValueError(SIZE_EXPECTED)
    return int(number * _BINARY[prefix])


def format_duration(seconds: float) -> str:
    """For people reading a log or a hang report: "2.5 s", "15 min 00 s", "2 h 05 min",
    "3 d 04 h" (the watchdog's alerts write durations the same way)."""
    if seconds < 60:
        return f"{max(0.0, seconds):.1f} s"
    whole = int(round(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours:02d} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s"
