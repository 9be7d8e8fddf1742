"""Parsers for the human units in the config: durations, sizes, counts, percentages.

Each parser raises ValueError whose text is what was expected, so the config loader
can name the file, table, key and value around it.
"""
from __future__ import annotations

import math
import re

DURATION_EXPECTED = 'a duration such as "90s", "5m", "2h", "1d" or "1h30m"'
SIZE_EXPECTED = 'a size such as "500GiB", "400TiB", "1.5TB", "800G" or a whole number of bytes'
SIZE_WITH_UNIT = ('a size with its unit, such as "500GiB", "400TiB", "1.5TB", "800G" or "4096B" '
                  '(a bare number is refused: write "80%" for a percentage)')
COUNT_EXPECTED = 'a count such as 3000000, "3M" or "500k"'
PERCENT_EXPECTED = 'a percentage such as "75%"'

MAX_DURATION = 10 * 365 * 86400.0
"""Ten years: far beyond any sensible period or timeout, far inside what timers (time_t,
threading.TIMEOUT_MAX) and datetimes (year 9999) can hold, so a valid value always runs."""
MAX_AMOUNT = 2**63 - 1
"""Sizes and counts are stored in SQLite, whose integers are 64-bit."""

_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_BINARY = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50, "e": 2**60}
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15, "e": 10**18}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?b?)", re.IGNORECASE)
_COUNT = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)", re.IGNORECASE)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")


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
    if not math.isfinite(total) or total > MAX_DURATION:
        raise ValueError(f"{DURATION_EXPECTED}, at most 10 years ({MAX_DURATION:.0f}s)")
    return total


def parse_size(value: object, bare_bytes: bool = True) -> int:
    """Bytes. "GiB"/"G" are binary (as du and lfs print them), "GB" is decimal, "B" bytes.
    `bare_bytes=False` refuses a number without a unit: in a config, `warn = "80"` is far
    more often a forgotten "%" than 80 bytes."""
    expected = SIZE_EXPECTED if bare_bytes else SIZE_WITH_UNIT
    if isinstance(value, bool):
        raise ValueError(expected)
    if isinstance(value, int):
        if value < 0 or not bare_bytes:
            raise ValueError(expected)
        return _bounded(value, expected)
    if not isinstance(value, str):
        raise ValueError(expected)
    match = _SIZE.fullmatch(value.strip())
    if not match:
        raise ValueError(expected)
    number, prefix, suffix = float(match.group(1)), match.group(2).lower(), match.group(3).lower()
    if not (bare_bytes or prefix or suffix):
        raise ValueError(expected)
    if suffix == "b" and prefix:
        return _bounded(number * _DECIMAL[prefix], expected)
    if suffix == "i":
        raise ValueError(expected)
    return _bounded(number * _BINARY[prefix], expected)


def _bounded(amount: float, expected: str) -> int:
    """int(amount), refused when it is not finite or does not fit 64 bits."""
    if not math.isfinite(amount) or amount > MAX_AMOUNT:
        raise ValueError(f"{expected}, at most 8EiB (2**63 - 1)")
    return int(amount)


def parse_count(value: object) -> int:
    """Inode and file counts: decimal multipliers ("3M" = 3,000,000)."""
    if isinstance(value, bool):
        raise ValueError(COUNT_EXPECTED)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(COUNT_EXPECTED)
        return _bounded(value, COUNT_EXPECTED)
    if not isinstance(value, str):
        raise ValueError(COUNT_EXPECTED)
    match = _COUNT.fullmatch(value.strip())
    if not match:
        raise ValueError(COUNT_EXPECTED)
    prefix = match.group(2).lower()
    return _bounded(float(match.group(1)) * (_DECIMAL[prefix] if prefix else 1), COUNT_EXPECTED)


def parse_percent(value: object) -> float:
    """"75%" -> 75.0, between 0 and 100."""
    if not isinstance(value, str):
        raise ValueError(PERCENT_EXPECTED)
    match = _PERCENT.fullmatch(value.strip())
    if not match or float(match.group(1)) > 100:
        raise ValueError(PERCENT_EXPECTED + " between 0% and 100%")
    return float(match.group(1))


def format_duration(seconds: float) -> str:
    """5400 -> "1h30m"; for messages a person reads."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts[:2])


def format_size(num_bytes: float) -> str:
    """Binary units, as du -h prints them."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}PiB"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """"1 channel", "2 channels", "0 checks"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
