"""The argument types of the recovery commands (`python -m trainguard.recovery`, `.inplace`,
`.requeue`): each refuses what is out of range with a clear message, which argparse turns
into exit 2 and `usage:` (never a traceback, never a value that breaks a later step: a NaN
time fails the record, a NaN grace never reaps)."""
from __future__ import annotations

import argparse
import math
import re
import time
from collections.abc import Callable

YEAR = 365.25 * 86400.0
EPOCH_SPAN = 10 * YEAR      # a recorded time this far from now is a typo or a broken clock
DAY = 86400.0
_JOB = re.compile(r"^\d+(?:_\d+)?$")   # 123, or an array task 123_4


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number")
    return value


def _whole(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None


def epoch(text: str, now: Callable[[], float] = time.time) -> float:
    """A moment in epoch seconds, within ten years of now."""
    value = _number(text)
    if abs(value - now()) > EPOCH_SPAN:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a time in epoch seconds within 10 years of now (`date +%s`)")
    return value


def _whole_at_least(text: str, low: int, expected: str, high: int | None = None) -> int:
    """A whole number in [low, high]; else argparse's error (exit 2) saying what was expected."""
    value = _whole(text)
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
    return value


def step(text: str) -> int:
    """A training step: 0 or more, or -1 for none."""
    return _whole_at_least(text, -1, "a step >= 0 (or -1: none)")


def count(text: str) -> int:
    """How many so far: 0 or more."""
    return _whole_at_least(text, 0, "a whole number >= 0")


def positive(text: str) -> int:
    """A whole number of at least 1 (nodes, a limit)."""
    return _whole_at_least(text, 1, "a whole number >= 1")


def seconds(text: str) -> float:
    """A wait: more than 0 and at most a day."""
    value = _number(text)
    if not 0 < value <= DAY:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds > 0 and <= {DAY:g}")
    return value


def exit_code(text: str) -> int:
    """A process exit code as the shell gives it: 0 to 255."""
    return _whole_at_least(text, 0, "an exit code 0-255", high=255)


def pid(text: str) -> int:
    return _whole_at_least(text, 1, "a process id >= 1")


def job_id(text: str) -> str:
    """A Slurm job id (123, or an array task 123_4): it is passed on to Slurm's commands."""
    if not _JOB.match(text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a job id such as 1234 (an array task: 1234_5)")
    return text
