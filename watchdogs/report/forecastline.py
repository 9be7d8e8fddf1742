"""The disk forecast as a line to draw: the same least-squares rate the disk check uses
(watchdogs.fsprobe.forecast, over its `forecast_window`, from an hour of history on), drawn
forward from the last reading, and the moments it crosses `warn`, `crit` and full."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watchdogs.fsprobe.forecast import forecast

FAR = 7 * 86400.0
"""A crossing further than this from the last reading is said, not drawn: the history would
shrink to a sliver at the left of the chart."""


@dataclass(frozen=True)
class ForecastLine:
    rate: float
    """Growth per second."""
    start: tuple[float, float]
    end: tuple[float, float]
    crossings: tuple[tuple[str, float], ...]
    """("warn" | "crit" | "full", unix time), soonest first; only those ahead of the last reading."""


def forecast_line(points: Sequence[tuple[float, float]], now: float, window: float,
                  warn: float | None, crit: float | None, capacity: float | None) -> ForecastLine | None:
    """None without a capacity, or before the check itself would forecast."""
    if not points or not capacity:
        return None
    found = forecast(points, capacity, now, window)
    if found is None:
        return None
    t_last, v_last = points[-1]
    rate = found.rate
    crossings = []
    for label, level in (("warn", warn), ("crit", crit), ("full", capacity)):
        if level is not None and rate > 0 and level > v_last:
            crossings.append((label, t_last + (level - v_last) / rate))
    crossings.sort(key=lambda c: c[1])
    span = max(t_last - points[0][0], 3600.0)
    horizon = t_last + span
    near = [t for _, t in crossings if t - t_last <= FAR]
    if near:
        horizon = max(horizon, min(max(near), t_last + FAR))
    end = (horizon, v_last + rate * (horizon - t_last))
    return ForecastLine(rate, (t_last, v_last), end, tuple(crossings))
