"""The page: one self-contained HTML file (styles inline, charts as inline SVG, no script,
no font, image or link to fetch), rendered with jinja2's autoescape from a `Report`."""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from watchdogs import humanize, ownfiles
from watchdogs.report import storycharts, svg
from watchdogs.report.data import DiskView, ItemView, Report, Run
from watchdogs.report.forecastline import ForecastLine

if TYPE_CHECKING:
    import jinja2

TEMPLATE = "page.html.j2"
WARN, CRIT = "#d4a017", "#c0392b"


def when(t: float | None) -> str:
    """ "Wed 25 Nov 16:50 CET": a local time a person reads."""
    if t is None:
        return "-"
    return time.strftime("%a %d %b %H:%M %Z", time.localtime(t))


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"in {humanize.duration(-seconds)}" if seconds < 0 else f"{humanize.duration(seconds)} ago"


def _binary(top: float) -> float:
    """The binary unit humanize.size shows `top` in (1024**3 for 93 GiB)."""
    unit = 1.0
    while top >= 1024 * unit and unit < 1024.0 ** 5:
        unit *= 1024
    return unit


def _inodes(value: float) -> str:
    return humanize.count(int(round(value)))


def _say(run: Run) -> str:
    job = f" (job {run.job_id})" if run.job_id else ""
    return f"{when(run.started)}: {run.status or 'interrupted'}{job} - {run.summary}"


def _strip(item: ItemView, t0: float, t1: float) -> str:
    """One bar per run; beyond svg.MAX_POINTS runs, one bar per stretch of the same result
    (a week of a drop-in run every minute would be 10,000 bars no wider than a hair)."""
    if len(item.runs) <= svg.MAX_POINTS:
        ticks = [svg.Tick(r.status, r.started, r.finished, _say(r)) for r in item.runs]
    else:
        stretches: list[list[Run]] = []
        for run in item.runs:
            if stretches and stretches[-1][0].status == run.status:
                stretches[-1][1:] = [run]
                continue
            stretches.append([run])
        counts = _lengths(item.runs)
        ticks = [svg.Tick(s[0].status, s[0].started, s[-1].finished,
                          f"{n} runs {s[0].status or 'interrupted'} from {when(s[0].started)}; the last: "
                          f"{_say(s[-1])}") for s, n in zip(stretches, counts, strict=True)]
    return svg.status_strip(ticks, title=f"{item.item}: one bar per run, coloured by result", t0=t0, t1=t1)


def _lengths(runs: tuple[Run, ...]) -> list[int]:
    """How many runs each stretch of the same result holds."""
    counts: list[int] = []
    for i, run in enumerate(runs):
        if i and runs[i - 1].status == run.status:
            counts[-1] += 1
        else:
            counts.append(1)
    return counts


def _forecast_parts(line: ForecastLine | None, label: str) -> tuple[list[svg.Series], list[svg.Mark]]:
    if line is None:
        return [], []
    series = [svg.Series(f"{label} forecast", (line.start, line.end), dashed=True, colour="#7a7a7a")]
    colours = {"warn": WARN, "crit": CRIT, "full": CRIT}
    marks = [svg.Mark(f"{name} {when(t)}", t, colours[name])
             for name, t in line.crossings if t <= line.end[0]]
    return series, marks


def _disk_charts(disk: DiskView, now: float) -> list[str]:
    charts = []
    lv = disk.levels
    for label, points, line, unit, warn, crit in (
            ("bytes used", disk.bytes_used, disk.bytes_forecast, humanize.size,
             lv.warn if lv else None, lv.crit if lv else None),
            ("inodes used", disk.inodes_used, disk.inodes_forecast, _inodes,
             lv.inodes_warn if lv else None, lv.inodes_crit if lv else None)):
        if not points:
            continue
        extra, marks = _forecast_parts(line, label)
        levels = [svg.Level(f"{name} {unit(v)}", v, colour)
                  for name, v, colour in (("warn", warn, WARN), ("crit", crit, CRIT)) if v is not None]
        t1 = max([now, *(s.points[-1][0] for s in extra)])
        top = max([v for _, v in points] + [lv.value for lv in levels])
        charts.append(svg.line_chart([svg.Series(label, points), *extra], title=f"{disk.name}: {label}",
                                     y_label=label, fmt=unit, t0=points[0][0], t1=t1,
                                     levels=levels, marks=marks,
                                     unit=_binary(top) if unit is humanize.size else 1.0))
    return charts


def environment() -> jinja2.Environment:
    """The page's template, compiled once: the scheduler keeps it and renders every tick."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters.update(when=when, ago=ago, duration=humanize.duration, size=humanize.size)
    env.get_template(TEMPLATE)  # compiled and cached in the environment now
    return env


def render(report: Report, env: jinja2.Environment | None = None) -> str:
    from markupsafe import Markup as markup  # jinja2's own dependency

    env = env or environment()
    items = report.trainings + report.others
    starts = [r.started for i in items for r in i.runs]
    t0 = min(starts, default=report.now - 3600)
    strips = {i.item: _strip(i, t0, report.now) for i in items if i.runs}
    disks = {d.name: _disk_charts(d, report.now) for d in report.disks}
    stories = {t.item: storycharts.training_charts(t.story, report.now) for t in report.trainings if t.story}
    nodes = {n.name: storycharts.nodes_chart(n.name, n.history, report.now) for n in report.nodes}
    return env.get_template(TEMPLATE).render(
        r=report, strips={k: markup(v) for k, v in strips.items()},
        disks={k: [markup(c) for c in v] for k, v in disks.items()},
        stories={k: [markup(c) for c in v] for k, v in stories.items()},
        node_charts={k: markup(v) for k, v in nodes.items() if v},
        year=365 * 86400.0, colours=svg.STATUS_COLOURS, event_colours=storycharts.EVENT_COLOURS,
        checkpoint=storycharts.CHECKPOINT, drained=storycharts.DRAINED, down=storycharts.DOWN)


def write(report: Report, out: Path, env: jinja2.Environment | None = None) -> Path:
    """Write the page next to `out` and rename it into place: a reader (a browser, Open
    OnDemand's file view) never sees half a page."""
    text = render(report, env)
    # `--out` may name a shared folder (a web or Open OnDemand folder): mkstemp there, never
    # a predictable name a link may be planted at. 0644: the page is for others to read.
    ownfiles.write_atomic(out, text.encode("utf-8"), 0o644)
    return out
