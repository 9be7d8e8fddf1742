"""When will it be full? A least-squares line through the recent history of usage.

Pure functions of the history and the time, so they are tested on synthetic histories.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from watchdogs.humanize import duration

DAY = 86400.0


@dataclass(frozen=True)
class Forecast:
    rate: float
    """Growth per second over the window (negative: shrinking)."""
    seconds_to_full: float | None
    """None when not growing."""
    points: int
    span: float

    def describe(self, window: float = DAY) -> str:
        hours = duration(window)
        if self.seconds_to_full is None:
            return f"not growing at the rate of the last {hours}"
        if self.seconds_to_full <= 0:
            return "full"
        return f"full in ~{duration(self.seconds_to_full)} at the rate of the last {hours}"


def fit_rate(points: Sequence[tuple[float, float]]) -> float | None:
    """Slope of the least-squares line through (time, value) points."""
    n = len(points)
    if n < 2:
        return None
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var


def forecast(history: Sequence[tuple[float, float]], capacity: float, now: float,
             window: float = DAY, min_span: float = 3600.0) -> Forecast | None:
    """None until the window holds at least two points spanning `min_span` seconds."""
    recent = sorted((t, v) for t, v in history if now - window <= t <= now)
    if len(recent) < 2 or recent[-1][0] - recent[0][0] < min_span:
        return None
    rate = fit_rate(recent)
    if rate is None:
        return None
    current = recent[-1][1]
    if rate <= 0 or not math.isfinite(rate):
        return Forecast(rate, None, len(recent), recent[-1][0] - recent[0][0])
    return Forecast(rate, max(0.0, (capacity - current) / rate), len(recent),
                    recent[-1][0] - recent[0][0])
