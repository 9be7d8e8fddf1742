"""Typed option declarations. Each check type and channel declares its keys with these;
the loader validates every table against them and reports every problem at once.

A kind is a callable that turns the raw TOML value into the typed value, or raises
ValueError whose text says what was expected.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdogs import units

Kind = Callable[[Any], Any]
_MISSING = object()


@dataclass(frozen=True)
class Option:
    kind: Kind
    default: Any = None
    required: bool = False
    help: str = ""


def string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("a non-empty string")
    return value


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
    return parse


def number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("a number")
    return float(value)


def duration(value: Any) -> float:
    return units.parse_duration(value)


def size(value: Any) -> int:
    return units.parse_size(value)


def count(value: Any) -> int:
    return units.parse_count(value)


def percent(value: Any) -> float:
    return units.parse_percent(value)


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
    return parse


def choice(*allowed: str) -> Kind:
    def parse(value: Any) -> str:
        if value not in allowed:
            raise ValueError("one of " + ", ".join(repr(a) for a in allowed))
        return value
    return parse


def regex(groups: int | None = None) -> Kind:
    def parse(value: Any) -> re.Pattern[str]:
        expected = "a regular expression" + (f" with {groups} capture group" if groups else "")
        if not isinstance(value, str):
            raise ValueError(expected)
        try:
            pattern = re.compile(value)
        except re.error as exc:
            raise ValueError(f"{expected} ({exc})") from None
        if groups is not None and pattern.groups != groups:
            raise ValueError(expected)
        return pattern
    return parse


def path(value: Any) -> Path:
    """A path; relative paths are resolved against the config file's folder by the loader."""
    if not isinstance(value, str) or not value:
        raise ValueError("a path (string)")
    return Path(value).expanduser()


def string_list(value: Any) -> tuple[str, ...]:
    """A list of strings; a single string is taken as a list of one."""
    if isinstance(value, str) and value:
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise ValueError("a string or a non-empty list of strings")


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
        return {s: names for s in SEVERITIES}
    if isinstance(value, dict) and value and set(value) <= set(SEVERITIES):
        try:
            return {k: string_list(v) if v else () for k, v in value.items()}
        except ValueError:
            raise ValueError(expected) from None
    raise ValueError(expected)


def validate_table(raw: Mapping[str, Any], options: Mapping[str, Option],
                   skip: Sequence[str] = ()) -> tuple[dict[str, Any], list[tuple[str, Any, str]]]:
    """Parse `raw` against `options`. Returns (values, problems as (key, value, expected))."""
    values: dict[str, Any] = {}
    problems: list[tuple[str, Any, str]] = []
    for key, value in raw.items():
        if key in skip:
            continue
        if key not in options:
            known = ", ".join(sorted(set(options) | set(skip)))
            problems.append((key, value, f"no such key here (known keys: {known})"))
            continue
        try:
            values[key] = options[key].kind(value)
        except ValueError as exc:
            problems.append((key, value, str(exc)))
    for key, option in options.items():
        if key in raw or key in skip:
            continue
        if option.required:
            problems.append((key, _MISSING_TEXT, f"this key is required ({option.help or 'no default'})"))
        else:
            values[key] = option.default
    return values, problems


_MISSING_TEXT = "(missing)"
