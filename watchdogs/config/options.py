"""Typed option declarations. Each check type and channel declares its keys with these;
the loader validates every table against them (watchdogs.config.tables) and reports every
problem at once.

A kind is a callable that turns the raw TOML value into the typed value, or raises
ValueError whose text says what was expected. Kinds are bounded so that what validates
also runs: durations fit every timer, sizes fit SQLite, paths hold no NUL, names fit
Slurm and file names. Each kind carries a `kind_name` so tools (the property-based test,
docs) can tell kinds apart without calling them.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdogs import units

Kind = Callable[[Any], Any]


@dataclass(frozen=True)
class Option:
    """One key of a table: its kind (parser), default and the rules the loader checks."""

    kind: Kind
    default: Any = None
    required: bool = False
    help: str = ""
    exists: str | None = None
    """paths.DIR or paths.DIR_OR_NEW: checked by the loader once relative paths are resolved."""
    below: str | None = None
    """The name of a key of the same table whose value this one must stay under (a warning
    threshold below its critical one); compared only when both are of the same sort."""
    above: str | None = None
    """Like `below`, the other way round (warn_days above crit_days)."""


def named_kind(name: str, fn: Kind) -> Kind:
    fn.kind_name = name  # type: ignore[attr-defined]  # a tag for tools, read with getattr
    return fn


def kind_name(kind: Kind) -> str:
    return str(getattr(kind, "kind_name", getattr(kind, "__name__", "unknown")))


def _no_nul(value: str, expected: str) -> str:
    if "\0" in value:
        raise ValueError(f"{expected} without NUL characters")
    return value


def string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("a non-empty string")
    return _no_nul(value, "a string")


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("true or false")
    return value


def integer(minimum: int = 0, maximum: int | None = None) -> Kind:
    def parse(value: Any) -> int:
        expected = f"a whole number >= {minimum}" + (f" and <= {maximum}" if maximum else "")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(expected)
        if value < minimum or (maximum is not None and value > maximum):
            raise ValueError(expected)
        return value
    parse.minimum, parse.maximum = minimum, maximum  # type: ignore[attr-defined]  # for tools
    return named_kind("integer", parse)


def number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("a finite number")
    return float(value)


def duration_at_least(minimum: float) -> Kind:
    """A duration of at least `minimum` seconds (and at most units.MAX_DURATION): a period
    or a timeout of 0 would spin or never wait."""
    def parse(value: Any) -> float:
        seconds = units.parse_duration(value)
        if seconds < minimum:
            shown = units.format_duration(minimum) if minimum >= 1 else f"{minimum * 1000:g}ms"
            raise ValueError(f"{units.DURATION_EXPECTED}, at least {shown}")
        return seconds
    parse.minimum = minimum  # type: ignore[attr-defined]  # for tools
    return named_kind("duration", parse)


duration = duration_at_least(0.0)
"""Ages, windows, grace periods; "0s" may mean "off" (e.g. fail_fast)."""
period = duration_at_least(1.0)
"""How often something runs: at least a second."""


def _timeout(value: Any) -> float:
    seconds = duration(value)
    if seconds < 0.001:
        raise ValueError(f"{units.DURATION_EXPECTED}, at least 1ms for a timeout")
    if seconds > MAX_TIMEOUT:
        raise ValueError(f"{units.DURATION_EXPECTED}, at most 1d for a timeout")
    return seconds


MAX_TIMEOUT = 86400.0
"""A timeout of at most a day: poll(2) and friends take milliseconds in a C int (24.8 days)."""
timeout = named_kind("duration", _timeout)
"""How long to wait for something: positive, at most a day."""


def size(value: Any) -> int:
    return units.parse_size(value, bare_bytes=False)


named_kind("size", size)


def count(value: Any) -> int:
    return units.parse_count(value)


def percent(value: Any) -> float:
    return units.parse_percent(value)


for _kind, _name in ((string, "string"), (boolean, "boolean"), (number, "number"), (count, "count"),
                     (percent, "percent")):
    named_kind(_name, _kind)


@dataclass(frozen=True)
class Limit:
    """An absolute amount or a percentage of a total."""

    amount: float | None = None
    percent: float | None = None

    def resolve(self, total: float | None) -> float | None:
        if self.amount is not None:
            return self.amount
        if total is None or self.percent is None:
            return None
        return total * self.percent / 100


def limit(absolute: Kind) -> Kind:
    """"85%" or an absolute value parsed by `absolute` (a size or a count)."""
    def parse(value: Any) -> Limit:
        if isinstance(value, str) and value.strip().endswith("%"):
            return Limit(percent=units.parse_percent(value))
        try:
            return Limit(amount=absolute(value))
        except ValueError as exc:
            raise ValueError(f'{exc}, or a percentage such as "85%"') from None
    parse.absolute = absolute  # type: ignore[attr-defined]  # for tools
    return named_kind("limit", parse)


def choice(*allowed: str) -> Kind:
    def parse(value: Any) -> str:
        if value not in allowed:
            raise ValueError("one of " + ", ".join(repr(a) for a in allowed))
        return value
    parse.allowed = allowed  # type: ignore[attr-defined]  # for tools
    return named_kind("choice", parse)


def regex(groups: int | None = None) -> Kind:
    """A user pattern, compiled for time-bounded matching (watchdogs.userregex)."""
    def parse(value: Any) -> Any:
        import regex as regex_pkg

        from watchdogs.userregex import compile_user

        expected = "a regular expression" + (f" with {groups} capture group" if groups else "")
        if not isinstance(value, str):
            raise ValueError(expected)
        try:
            pattern = compile_user(_no_nul(value, expected))
        except (re.error, regex_pkg.error, RecursionError, OverflowError) as exc:
            raise ValueError(f"{expected} ({exc})") from None
        if groups is not None and pattern.groups != groups:
            raise ValueError(expected)
        return pattern
    return named_kind("regex", parse)


def path(value: Any) -> Path:
    """A path; relative paths are resolved against the config file's folder by the loader."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a path (string)")
    try:
        return Path(_no_nul(value, "a path")).expanduser()
    except RuntimeError:  # "~nobody/x": no such user's home
        raise ValueError("a path whose ~user exists") from None


def string_list(value: Any) -> tuple[str, ...]:
    """A list of strings; a single string is taken as a list of one."""
    expected = "a string or a non-empty list of strings"
    if isinstance(value, str) and value:
        return (_no_nul(value, expected),)
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(_no_nul(v, expected) for v in value)
    raise ValueError(expected)


named_kind("path", path)
named_kind("string_list", string_list)


SEVERITIES = ("warning", "critical", "unknown", "resolved", "notice")


def notify_route(value: Any) -> Mapping[str, tuple[str, ...]]:
    """`notify = ["email"]` (every severity) or `{ warning = [...], critical = [...] }`."""
    expected = ('a list of channel names, or a table by severity such as '
                '{ warning = ["slack"], critical = ["email", "sms"] }')
    if isinstance(value, (str, list)):
        try:
            names = string_list(value)
        except ValueError:
            raise ValueError(expected) from None
        return dict.fromkeys(SEVERITIES, names)
    if isinstance(value, dict) and value and set(value) <= set(SEVERITIES):
        try:
            return {k: string_list(v) if v else () for k, v in value.items()}
        except ValueError:
            raise ValueError(expected) from None
    raise ValueError(expected)


named_kind("notify_route", notify_route)
