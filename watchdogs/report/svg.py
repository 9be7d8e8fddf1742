"""Charts as inline SVG text: pure functions of their points, no JavaScript, no fonts
fetched, nothing outside the page. Every text that came from data is escaped here, so the
page can insert the SVG as it is.

Times are drawn in the local zone of the machine that writes the page (the login node's,
where the user reads `watchdogs status` too) and the axis says which zone that is.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 720, 200
LEFT, RIGHT, TOP, BOTTOM = 78, 16, 14, 40
MAX_POINTS = 400
"""A series longer than this is thinned (every k-th point and the last): a week of one-minute
readings would make the page heavy and the line no clearer."""

DOTS = 60
"""Up to this many readings, each is drawn as a dot on its line too."""
STATUS_COLOURS = {"OK": "#6a9f7a", "WARNING": "#d4a017", "UNKNOWN": "#8c8c8c", "CRITICAL": "#c0392b",
                  None: "#b8b8b8"}
_STEPS = (1, 2, 5, 10, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400,
          7 * 86400)


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]
    """(unix time, value), in time order."""
    dashed: bool = False
    colour: str = "#2f6690"
    line: bool = True
    """False: dots only (checkpoints: moments, not a quantity that moves between them)."""


@dataclass(frozen=True)
class Level:
    """A horizontal line: `warn` or `crit` at its value."""

    label: str
    value: float
    colour: str


@dataclass(frozen=True)
class Mark:
    """A vertical line at a moment: "crit in 3 d"."""

    label: str
    t: float
    colour: str


@dataclass(frozen=True)
class Tick:
    status: str | None
    """A Status name, None for a run cut off (interrupted)."""
    start: float
    end: float
    title: str


def thin(points: Sequence[tuple[float, float]], limit: int = MAX_POINTS) -> tuple[tuple[float, float], ...]:
    if len(points) <= limit:
        return tuple(points)
    step = math.ceil(len(points) / (limit - 1))
    kept = list(points[::step])
    if kept[-1] != points[-1]:
        kept.append(points[-1])
    return tuple(kept)


def zone_name(t: float) -> str:
    return time.strftime("%Z", time.localtime(t)) or time.strftime("UTC%z", time.localtime(t))


def time_ticks(t0: float, t1: float, most: int = 7) -> list[tuple[float, str]]:
    """Round local times between t0 and t1 and their labels: "14:30", or "Tue 14:00" once
    the span passes a day."""
    span = max(t1 - t0, 1.0)
    step = next((s for s in _STEPS if span / s <= most), _STEPS[-1])
    offset = time.localtime(t0).tm_gmtoff
    first = math.ceil((t0 + offset) / step) * step - offset
    fmt = "%a %H:%M" if span > 86400 else "%H:%M" if step >= 60 else "%H:%M:%S"
    ticks: list[tuple[float, str]] = []
    t = float(first)
    while t <= t1:
        ticks.append((t, time.strftime(fmt, time.localtime(t))))
        t += step
    return ticks


def value_ticks(lo: float, hi: float, most: int = 5, least: float = 0.0) -> list[float]:
    """1-2-5 steps covering lo..hi, none smaller than `least` (1 for counts of things)."""
    if hi <= lo:
        hi = lo + 1
    raw = max((hi - lo) / most, least)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int(math.ceil((hi - start) / step)) + 1)]


Scale = Callable[[float], float]


def _frame(t0: float, t1: float, lo: float, hi: float) -> tuple[Scale, Scale]:
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    return (lambda t: LEFT + (t - t0) / max(t1 - t0, 1e-9) * w,
            lambda v: TOP + h - (v - lo) / max(hi - lo, 1e-9) * h)


def line_chart(series: Sequence[Series], *, title: str, y_label: str, fmt: Callable[[float], str],
               t0: float, t1: float, levels: Sequence[Level] = (), marks: Sequence[Mark] = (),
               unit: float = 1.0, whole: bool = False) -> str:
    """Lines over time with labelled axes, level lines and moment marks. `unit`: the value
    axis steps round in this unit (1024**3 for GiB), not in ones; `whole`: in whole units
    (a count of nodes has no half)."""
    values = [v for s in series for _, v in s.points] + [lv.value for lv in levels]
    lo, hi = (min(values, default=0.0), max(values, default=1.0))
    ticks = [v * unit for v in value_ticks(min(lo, 0.0) / unit, hi / unit, least=1.0 if whole else 0.0)]
    lo, hi = ticks[0], ticks[-1]
    x, y = _frame(t0, t1, lo, hi)
    parts = [_open(title)]
    for v in ticks:
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                     f'<text class="ylab" x="{LEFT - 6}" y="{y(v) + 4:.1f}">{escape(fmt(v))}</text>')
    parts += _time_axis(t0, t1, x)
    parts.append(f'<text class="axis" transform="translate(12 {TOP + (HEIGHT - TOP - BOTTOM) / 2:.0f}) '
                 f'rotate(-90)">{escape(y_label)}</text>')
    for lv in levels:
        parts.append(f'<line class="level" stroke="{lv.colour}" x1="{LEFT}" x2="{WIDTH - RIGHT}" '
                     f'y1="{y(lv.value):.1f}" y2="{y(lv.value):.1f}"/>'
                     f'<text class="levlab" fill="{lv.colour}" '
                     f'x="{LEFT + 4}" y="{y(lv.value) - 4:.1f}">{escape(lv.label)}</text>')
    for i, m in enumerate(marks):  # labels a line apart, so that close marks stay readable
        parts.append(f'<line class="mark" stroke="{m.colour}" x1="{x(m.t):.1f}" x2="{x(m.t):.1f}" '
                     f'y1="{TOP}" y2="{HEIGHT - BOTTOM}"><title>{escape(m.label)}</title></line>'
                     f'<text class="marklab" fill="{m.colour}" {_beside(x(m.t))} '
                     f'y="{TOP + 12 + 13 * (i % 3)}">{escape(m.label)}</text>')
    for s in series:
        pts = thin(s.points)
        text = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        if not s.line:  # moments (checkpoints): as many dots as a chart shows apart, the last kept
            pts = thin(s.points, DOTS)
            parts += [f'<circle class="point" data-label="{escape(s.label)}" cx="{x(t):.1f}" cy="{y(v):.1f}" '
                      f'r="3.5" fill="{s.colour}"><title>{escape(s.label)}</title></circle>' for t, v in pts]
            continue
        parts.append(f'<polyline class="series" data-label="{escape(s.label)}" data-points="{len(pts)}" '
                     f'stroke="{s.colour}"{dash} points="{text}"><title>{escape(s.label)}</title></polyline>')
        if len(pts) <= DOTS and not s.dashed:  # few readings: each one seen (one alone has no line)
            parts += [f'<circle class="dot" cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{s.colour}"/>'
                      for t, v in pts]
    parts.append("</svg>")
    return "".join(parts)


def status_strip(ticks: Sequence[Tick], *, title: str, t0: float, t1: float) -> str:
    """One coloured bar per tick along a time axis; hovering one shows its words."""
    height = 64
    x, _ = _frame(t0, t1, 0, 1)
    parts = [_open(title, height)]
    for tk in ticks:
        left = x(tk.start)
        width = max(x(tk.end) - left, 2.0)
        parts.append(f'<rect class="run" data-status="{tk.status or "INTERRUPTED"}" x="{left:.1f}" y="6" '
                     f'width="{width:.1f}" height="22" fill="{STATUS_COLOURS.get(tk.status, "#b8b8b8")}">'
                     f'<title>{escape(tk.title)}</title></rect>')
    parts += _time_axis(t0, t1, x, bottom=height - 30)
    parts.append("</svg>")
    return "".join(parts)


def _beside(at: float) -> str:
    """A mark's label left of its line, or right of it near the value axis (where it would
    run over the axis' numbers)."""
    if at - LEFT < 160:
        return f'x="{at + 4:.1f}" style="text-anchor: start"'
    return f'x="{at - 4:.1f}"'


def _open(title: str, height: int = HEIGHT) -> str:
    return (f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" '
            f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>')


def _time_axis(t0: float, t1: float, x: Scale, bottom: float = HEIGHT - BOTTOM) -> list[str]:
    out = [f'<line class="axisline" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}"/>']
    for t, label in time_ticks(t0, t1):
        out.append(f'<line class="tick" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{bottom}" y2="{bottom + 4}"/>'
                   f'<text class="xlab" x="{x(t):.1f}" y="{bottom + 16}">{escape(label)}</text>')
    out.append(f'<text class="axis" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{bottom + 30}">'
               f'local time ({escape(zone_name(t1))})</text>')
    return out
