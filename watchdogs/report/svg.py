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
LEFT, RIGHT, TOP = 78, 16, 14
"""LEFT: the least room left of the plot; a chart whose value labels are wider takes more
(`_left`), so that they never meet the rotated axis label."""
FONT = 11.0
"""The charts' font size (page.html.j2: `svg.chart text`)."""
CHAR = 0.68 * FONT
"""A generous glyph width: the sans fonts a browser picks draw digits 0.55-0.64 em wide
(DejaVu Sans, Debian's default, the widest). Labels are placed from it, never measured."""
ASCENT, DESCENT = 0.95 * FONT, 0.25 * FONT
"""A line of text's extent above and below its baseline (what the browser's getBBox gives)."""
AXIS_X = 4 + ASCENT
"""The rotated value-axis label's baseline: its letters stand left of it, down to x = 4."""
GAP = 6
TIME_AXIS = round(18 + 14 + DESCENT + 2)
"""Room below a time axis: the tick labels' line (baseline 18 below) and the time zone's
line (14 below that) with its descenders, inside the chart's border."""
BOTTOM = TIME_AXIS + 4
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


def _frame(t0: float, t1: float, lo: float, hi: float, left: float = LEFT) -> tuple[Scale, Scale]:
    w, h = WIDTH - left - RIGHT, HEIGHT - TOP - BOTTOM
    return (lambda t: left + (t - t0) / max(t1 - t0, 1e-9) * w,
            lambda v: TOP + h - (v - lo) / max(hi - lo, 1e-9) * h)


def text_width(text: str) -> float:
    return len(text) * CHAR


@dataclass(frozen=True)
class Box:
    """Where a label's text lies (estimated from CHAR, ASCENT and DESCENT)."""

    x0: float
    y0: float
    x1: float
    y1: float

    @classmethod
    def of(cls, text: str, x: float, y: float, anchor: str = "start") -> Box:
        w = text_width(text)
        start = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
        return cls(start, y - ASCENT, start + w, y + DESCENT)

    def meets(self, other: Box, margin: float = 1.0) -> bool:
        return (self.x0 < other.x1 + margin and other.x0 < self.x1 + margin
                and self.y0 < other.y1 + margin and other.y0 < self.y1 + margin)


def _left(labels: Sequence[str]) -> float:
    """Room left of the plot for the widest value label, right of the rotated axis label."""
    widest = max((text_width(label) for label in labels), default=0.0)
    return max(float(LEFT), math.ceil(AXIS_X + DESCENT + 2 * GAP + widest))


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
    labels = [fmt(v) for v in ticks]
    left = _left(labels)
    x, y = _frame(t0, t1, lo, hi, left)
    parts = [_open(title)]
    for v, label in zip(ticks, labels, strict=True):
        parts.append(f'<line class="grid" x1="{left}" x2="{WIDTH - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                     f'<text class="ylab" x="{left - GAP}" y="{y(v) + 4:.1f}">{escape(label)}</text>')
    parts += _time_axis(t0, t1, x, left=left)
    middle = TOP + (HEIGHT - TOP - BOTTOM) / 2
    parts.append(f'<text class="axis" transform="translate({AXIS_X:.0f} {middle:.0f}) '
                 f'rotate(-90)">{escape(y_label)}</text>')
    taken: list[Box] = []
    for lv in levels:
        taken.append(Box.of(lv.label, left + 4, y(lv.value) - 4))
        parts.append(f'<line class="level" stroke="{lv.colour}" x1="{left}" x2="{WIDTH - RIGHT}" '
                     f'y1="{y(lv.value):.1f}" y2="{y(lv.value):.1f}"/>'
                     f'<text class="levlab" fill="{lv.colour}" '
                     f'x="{left + 4}" y="{y(lv.value) - 4:.1f}">{escape(lv.label)}</text>')
    for m in marks:
        parts.append(f'<line class="mark" stroke="{m.colour}" x1="{x(m.t):.1f}" x2="{x(m.t):.1f}" '
                     f'y1="{TOP}" y2="{HEIGHT - BOTTOM}"><title>{escape(m.label)}</title></line>')
        place = _mark_label(m.label, x(m.t), left, taken)
        if place is not None:  # no free line: the mark's own tooltip names it
            taken.append(place[0])
            parts.append(f'<text class="marklab" fill="{m.colour}" {place[1]}>{escape(m.label)}</text>')
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
    height = 6 + 22 + 4 + TIME_AXIS
    x, _ = _frame(t0, t1, 0, 1)
    parts = [_open(title, height)]
    for tk in ticks:
        left = x(tk.start)
        width = max(x(tk.end) - left, 2.0)
        parts.append(f'<rect class="run" data-status="{tk.status or "INTERRUPTED"}" x="{left:.1f}" y="6" '
                     f'width="{width:.1f}" height="22" fill="{STATUS_COLOURS.get(tk.status, "#b8b8b8")}">'
                     f'<title>{escape(tk.title)}</title></rect>')
    parts += _time_axis(t0, t1, x, bottom=height - TIME_AXIS)
    parts.append("</svg>")
    return "".join(parts)


def _mark_label(label: str, at: float, left: float, taken: Sequence[Box]) -> tuple[Box, str] | None:
    """Where a mark's label goes: left of its line, or right of it where it would run over
    the value axis' numbers, on the first line from the top that no other label holds (close
    marks stay readable). None when every line is taken."""
    right = at - text_width(label) - 4 < left
    x = at + 4 if right else at - 4
    row = TOP + ASCENT
    while row + DESCENT <= HEIGHT - BOTTOM:
        box = Box.of(label, x, row, "start" if right else "end")
        if box.x1 <= WIDTH and not any(box.meets(other) for other in taken):
            anchor = ' style="text-anchor: start"' if right else ""
            return box, f'x="{x:.1f}" y="{row:.1f}"{anchor}'
        row += ASCENT + DESCENT + 2
    return None


def _open(title: str, height: int = HEIGHT) -> str:
    return (f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" '
            f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>')


def _time_axis(t0: float, t1: float, x: Scale, bottom: float = HEIGHT - BOTTOM,
               left: float = LEFT) -> list[str]:
    """The axis line, its time labels (kept inside the chart at both ends, below the lowest
    value label) and the zone's line under them, all within TIME_AXIS of `bottom`."""
    out = [f'<line class="axisline" x1="{left}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}"/>']
    for t, label in time_ticks(t0, t1):
        half = text_width(label) / 2
        at = min(max(x(t), half + 2), WIDTH - half - 2)
        out.append(f'<line class="tick" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{bottom}" y2="{bottom + 4}"/>'
                   f'<text class="xlab" x="{at:.1f}" y="{bottom + 18}">{escape(label)}</text>')
    out.append(f'<text class="axis" x="{(left + WIDTH - RIGHT) / 2:.0f}" y="{bottom + 32}">'
               f'local time ({escape(zone_name(t1))})</text>')
    return out
