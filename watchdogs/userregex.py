"""User regular expressions (`progress`, `job_regex`), bounded in time.

Python's `re` cannot be stopped: a pattern such as `iter ((?:a+)+)$` against forty `a`s and
a `!` backtracks for longer than the age of the universe, and it holds the GIL while it
does, so neither the check's timeout thread nor the scheduler's signal handlers ever run.
User patterns are therefore compiled with the `regex` package (same syntax as `re`,
VERSION0) and matched with `timeout=` and `concurrent=True` (the GIL is released while it
matches): a runaway pattern raises RegexTimeout after about `MATCH_TIMEOUT` seconds and the
check says so as UNKNOWN, naming the pattern.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import regex

from watchdogs.errors import WatchdogsError

MATCH_TIMEOUT = 1.0   # s per match call; a sane pattern on a 64 KiB tail takes microseconds
Pattern = Any         # a regex.Pattern (the package ships no type hints)


class RegexTimeout(WatchdogsError):
    """A user pattern did not finish matching within MATCH_TIMEOUT."""

    def __init__(self, pattern: Pattern, what: str) -> None:
        super().__init__(f"the pattern /{pattern.pattern}/ took longer than {MATCH_TIMEOUT:g} s on "
                         f"{what} (catastrophic backtracking: nested repeats such as (a+)+); "
                         "simplify it")


def compile_user(text: str) -> Pattern:
    """Compile like re.compile (raises regex.error, a subclass of re.error's role)."""
    return regex.compile(text, flags=regex.VERSION0)


def _bounded(pattern: Pattern) -> Pattern:
    """A plain `re` pattern (a caller's own) is recompiled: only `regex` can be bounded."""
    return pattern if isinstance(pattern, regex.Pattern) else compile_user(pattern.pattern)


def finditer(pattern: Pattern, text: str, what: str) -> Iterator[Any]:
    pattern = _bounded(pattern)
    try:
        yield from pattern.finditer(text, timeout=MATCH_TIMEOUT, concurrent=True)
    except TimeoutError:
        raise RegexTimeout(pattern, what) from None


def fullmatch(pattern: Pattern, text: str, what: str) -> Any:
    pattern = _bounded(pattern)
    try:
        return pattern.fullmatch(text, timeout=MATCH_TIMEOUT, concurrent=True)
    except TimeoutError:
        raise RegexTimeout(pattern, what) from None
