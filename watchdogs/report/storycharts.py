"""The charts of a training's story and of the nodes over time, as inline SVG: the step
over time with checkpoints as dots and requeues, preemptions, hangs and ends as marked
moments; throughput and loss where training health provides them; drained/down counts."""
from __future__ import annotations

import time
from collections.abc import Sequence

from watchdogs import humanize
from watchdogs.report import svg
from watchdogs.report.story import NodesHistory, TrainingStory
from watchdogs.state.history import NodeCount

EVENT_COLOURS = {"requeued": "#d4a017", "preempted": "#b35c00", "hung": "#c0392b", "ended": "#555555"}
"""The events marked on the step chart; queued and running are in the table only (every
requeue is followed by them: marking them too would double the marks)."""
CHECKPOINT = "#6a9f7a"
DRAINED, DOWN = "#d4a017", "#c0392b"


def _count(value: float) -> str:
    return humanize.count(int(round(value)))


def _number(value: float) -> str:
    return f"{value:.3g}"


def _clock(t: float, span: float) -> str:
    """"14:05", or "Tue 14:05" on a chart longer than a day (a week shows several 14:05s)."""
    return time.strftime("%a %H:%M" if span > 86400 else "%H:%M", time.localtime(t))


def training_charts(story: TrainingStory, now: float) -> list[str]:
    samples = story.samples
    if not samples:
        return []
    t0 = min([samples[0].t, *(e.t for e in story.events if e.kind in EVENT_COLOURS)])
    t1 = max(now, samples[-1].t)
    marks = [svg.Mark(f"{e.kind} {_clock(e.t, t1 - t0)}", e.t, EVENT_COLOURS[e.kind])
             for e in story.events if e.kind in EVENT_COLOURS and e.t >= t0]
    checkpoints = story.checkpoints
    series = [svg.Series("step", tuple((s.t, float(s.step)) for s in samples))]
    if checkpoints:
        series.append(svg.Series("checkpoint saved", tuple((t, float(step)) for t, step in checkpoints),
                                 colour=CHECKPOINT, line=False))
    charts = [svg.line_chart(series, title=f"{story.item}: training step over time, checkpoints as dots",
                             y_label="step", fmt=_count, t0=t0, t1=t1, marks=marks, whole=True)]
    rates = tuple((s.t, s.rate) for s in samples if s.rate is not None)
    if rates:
        unit = next(s.unit for s in reversed(samples) if s.rate is not None) or "steps"
        charts.append(svg.line_chart([svg.Series("throughput", rates)], title=f"{story.item}: throughput",
                                     y_label=f"{unit}/s", fmt=_number, t0=t0, t1=t1, marks=marks))
    losses = tuple((s.t, s.loss) for s in samples if s.loss is not None)
    if losses:
        charts.append(svg.line_chart([svg.Series("loss", losses, colour="#7a4f9a")],
                                     title=f"{story.item}: loss", y_label="loss", fmt=_number,
                                     t0=t0, t1=t1, marks=marks))
    return charts


def _steps(counts: Sequence[NodeCount], pick: str, now: float) -> tuple[tuple[float, float], ...]:
    """A step line: each count holds until the next one, the last until now."""
    points: list[tuple[float, float]] = []
    for i, c in enumerate(counts):
        value = float(getattr(c, pick))
        if i:
            points.append((c.t, points[-1][1]))
        points.append((c.t, value))
    if points:
        points.append((now, points[-1][1]))
    return tuple(points)


def nodes_chart(name: str, nodes: NodesHistory, now: float) -> str | None:
    if not nodes.counts:
        return None
    series = [svg.Series("drained", _steps(nodes.counts, "drained", now), colour=DRAINED),
              svg.Series("down", _steps(nodes.counts, "down", now), colour=DOWN, dashed=True)]
    total = nodes.counts[-1].total
    return svg.line_chart(series, title=f"{name}: nodes drained and down over time", y_label="nodes",
                          fmt=_count, t0=nodes.counts[0].t, t1=now,
                          levels=[svg.Level(f"all {total}", float(total), "#bbbbbb")], whole=True)
