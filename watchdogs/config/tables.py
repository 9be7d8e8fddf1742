"""A table checked against its declared options (watchdogs.config.options): every value
parsed by its kind, every unknown or missing key and every broken order between two keys
reported at once, each as (key, value, what was expected), for the loader to name the file
and table.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from watchdogs.config.options import Limit, Option


def validate_table(raw: Mapping[str, Any], options: Mapping[str, Option],
                   skip: Sequence[str] = ()) -> tuple[dict[str, Any], list[tuple[str, Any, str]]]:
    """Parse `raw` against `options`. Returns (values, problems as (key, value, expected))."""
    values: dict[str, Any] = {}
    problems: list[tuple[str, Any, str]] = []
    for key, value in raw.items():
        if key in skip:
            continue
        if key not in options:
            problems.append((key, value, _unknown_key(key, options, skip)))
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
    return values, problems + order_problems(raw, values, options)


def order_problems(raw: Mapping[str, Any], values: Mapping[str, Any], options: Mapping[str, Option]
                   ) -> list[tuple[str, Any, str]]:
    """`below`/`above` rules between keys of one table, checked where both values are set
    and of the same sort (a percentage is not compared with an amount)."""
    problems = []
    for key, option in options.items():
        for other, sign in ((option.below, "<"), (option.above, ">")):
            if other is None or (key not in raw and other not in raw):
                continue
            mine, theirs = _comparable(values.get(key)), _comparable(values.get(other))
            if mine is None or theirs is None or mine[0] != theirs[0]:
                continue
            if (sign == "<" and not mine[1] < theirs[1]) or (sign == ">" and not mine[1] > theirs[1]):
                word = "below" if sign == "<" else "above"
                shown = raw.get(key, f"{values.get(key)} (default)")
                problems.append((key, shown, f"a value {word} {other} ({raw.get(other, 'its default')!r})"))
    return problems


def _comparable(value: Any) -> tuple[str, float] | None:
    if isinstance(value, Limit):
        return ("%", value.percent) if value.percent is not None else ("amount", float(value.amount or 0))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ("amount", float(value))
    return None


_MISSING_TEXT = "(missing)"


def _unknown_key(key: str, options: Mapping[str, Option], skip: Sequence[str]) -> str:
    places = [k for k in (f"{key}_env", f"{key}_file") if k in options]
    if places:
        return f"no secret in the config: write it in a file or variable named by {' or '.join(places)}"
    known = ", ".join(sorted(set(options) | set(skip)))
    return f"no such key here (known keys: {known})"
