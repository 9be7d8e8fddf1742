"""The status page on a phone (issue 36 item 5): a week of history with long summaries,
rendered by `watchdogs.report.html` and opened in Debian's headless Chromium with device
emulation (DevTools protocol) as a phone (390x844, pixel ratio 3, the page's viewport meta
honoured) and as a desktop (1280). Measured in the page's own DOM: the page is no wider than
the screen (only a table's or a chart's box scrolls), no table cell is narrower than its
longest word (a line breaks only at a space, a hyphen or a slash), and no two texts of a
chart overlap or leave it. Screenshots of the top, the "This week" table and the charts go
into the test's folder, to be looked at."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.report import browser
from watchdogs.alerts.silences import Silence
from watchdogs.report import html
from watchdogs.report.data import (
    AlertEntry,
    Channel,
    DiskLevels,
    DiskView,
    Instance,
    ItemView,
    NodeEvent,
    NodesView,
    OpenAlert,
    Report,
    Run,
)
from watchdogs.report.forecastline import forecast_line
from watchdogs.report.story import NodesHistory, TrainingStory
from watchdogs.state.history import Event, NodeCount, Sample

pytestmark = pytest.mark.skipif(browser.CHROMIUM is None,
                                reason="Debian's chromium is not installed (`make test-tools` installs it)")

NOW = 1_795_000_000.0
HOUR, DAY = 3600.0, 86400.0
T0 = NOW - 7 * DAY
TB, GB = 1024.0 ** 4, 1024.0 ** 3
LONG = ("my-training (job 18) failed on node17 after 3 h 12 min: exit 1; ended Tue 24 Nov 03:12 UTC; "
        "and 1 earlier run since the last look: job 17 was cancelled by alice. Last log lines in "
        "/scratch/alice/runs/llama-finetune-2026-11/train-18.out; resubmit not tried: "
        "RuntimeError: CUDA error: an illegal memory access was encountered")


def _training() -> ItemView:
    samples = tuple(Sample(T0 + i * 1800, i * 40, 12.5 + (i % 7) * 0.3, "samples", 3.2 - i * 0.008,
                           (i * 40 // 500) * 500 or None, i // 100, "running") for i in range(7 * 48))
    events = (Event("train", T0 + 1 * DAY, "requeued", "17",
                    "waiting again (BeginTime); its run ended NODE_FAIL"),
              Event("train", T0 + 1 * DAY + 60, "running", "17", ""),
              Event("train", T0 + 3 * DAY, "preempted", "17", "preempted (job 17)"),
              Event("train", T0 + 3 * DAY + 90, "running", "17", ""),
              Event("train", T0 + 3 * DAY + 400, "hung", "17",
                    "no step for 15 min at step 5280 (rank 3 on node4)"),
              Event("train", NOW - 2 * HOUR, "ended", "18", LONG))
    runs = tuple(Run(T0 + i * 1800, T0 + i * 1800 + 2, "CRITICAL" if i > 330 else "OK",
                     LONG if i > 330 else "my-training (job 17) running on node17 for 2 d 3 h", "17")
                 for i in range(7 * 48))
    story = TrainingStory("train", events, samples)
    return ItemView("train", "job", runs, runs[::40], story, "CRITICAL", LONG)


def _disk() -> DiskView:
    inodes = tuple((T0 + i * 3600, 40e6 + i * 150e3) for i in range(7 * 24))
    used = tuple((t, 300 * TB + (n - 40e6) * 2e6) for t, n in inodes)
    levels = DiskLevels(800 * TB, 100e6, 640 * TB, 720 * TB, 80e6, 90e6, 2 * DAY)
    return DiskView("scratch", "/lustre/scratch/projects/very-long-project-name-2026/alice/checkpoints",
                    used, inodes, levels,
                    forecast_line(used, NOW, levels.window, levels.warn, levels.crit, levels.bytes_cap),
                    forecast_line(inodes, NOW, levels.window, levels.inodes_warn, levels.inodes_crit,
                                  levels.inodes_cap))


def _nodes() -> NodesView:
    counts = tuple(NodeCount(T0 + i * 6 * HOUR, i % 3, i % 2, 64) for i in range(28))
    reasons = (("node17", "drained", "Kill task failed [slurm@2026-11-27T03:12:44] on node17 (cgroup)"),
               ("node4", "down*", "Not responding"))
    events = tuple(NodeEvent(NOW - i * 5 * HOUR, f"node{i}", "drained") for i in range(6))
    return NodesView("nodes", ("node17", "node4"), None, events, NodesHistory(counts, reasons))


def _report() -> Report:
    log = tuple(AlertEntry(NOW - i * 7 * HOUR, ["train", "scratch", "cron.daily/gpu-burn-in-check"][i % 3],
                           ["alert", "resolved", "reminder"][i % 3], ["CRITICAL", "OK", "WARNING"][i % 3],
                           LONG if i % 2 else "scratch: 712 TiB of 800 TiB used (89%); crit at 90% "
                           "in about 2 d 4 h at the growth of the last 2 d",
                           "email:oncall-team@example.org, slack:#ml-infra-alerts", 3 if i == 4 else None,
                           5400.0 if i % 3 == 0 else None) for i in range(20))
    drop = ItemView("cron.daily/gpu-burn-in-check", "drop-in",
                    tuple(Run(T0 + i * DAY, T0 + i * DAY + 30, "OK", "all 8 GPUs pass", None)
                          for i in range(7)),
                    (), None, "OK", "all 8 GPUs pass")
    return Report(
        now=NOW, fine=False,
        headline="Needs attention: train CRITICAL (my-training (job 18) failed on node17)",
        trainings=(_training(),), others=(drop,), disks=(_disk(),), nodes=(_nodes(),),
        open_alerts=(OpenAlert("train", "CRITICAL", LONG, NOW - 2 * HOUR, NOW - HOUR, "alice", False),),
        alert_log=log,
        silences=(Silence(3, "cron.daily/*", NOW - DAY, NOW + DAY, "GPU burn-in during the maintenance "
                          "window of the whole rack B (ticket INFRA-20931)", "bob", NOW - DAY),),
        instances=(Instance(4, "123456", "login-node-02.cluster.example.org", "chain", T0, NOW - 60,
                            None, None),),
        heartbeat_age=60.0, stale=False,
        channels=(Channel("email", None, None, NOW - HOUR),
                  Channel("slack", NOW - 3 * HOUR, "HTTP 503 from https://hooks.slack.com/services/T000/B000 "
                          "(Service Unavailable)", NOW - 5 * HOUR)),
        outbox_pending=2, missing=("GPU use over time: only the latest reading is in the heartbeat",))


MEASURE = """(() => {
  const found = {width: document.documentElement.scrollWidth, viewport: window.innerWidth,
                 narrow: [], overlaps: [], outside: [], charts: document.querySelectorAll('svg.chart').length,
                 cells: document.querySelectorAll('td').length};
  for (const td of document.querySelectorAll('td')) {
    const cell = td.getBoundingClientRect().width;
    const style = getComputedStyle(td);
    const inner = cell - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      // A word: up to a space, or through a hyphen or slash, where a browser may break a line
      // too ("oncall-|team", "runs/|train-18.out"); never inside one.
      const re = /[^\\s\\/-]+[\\/-]*|[\\/-]+/g;
      for (let m = re.exec(node.data); m; m = re.exec(node.data)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const rects = range.getClientRects();
        const word = range.getBoundingClientRect().width;
        if (rects.length > 1 || word > inner + 0.5) found.narrow.push([m[0], word, inner]);
      }
    }
  }
  for (const svg of document.querySelectorAll('svg.chart')) {
    const frame = svg.getBoundingClientRect();
    const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()]);
    for (const [text, b] of boxes)
      if (b.left < frame.left - 0.5 || b.right > frame.right + 0.5 || b.top < frame.top - 0.5
          || b.bottom > frame.bottom + 0.5) found.outside.push([svg.getAttribute('aria-label'), text]);
    for (let i = 0; i < boxes.length; i++)
      for (let j = i + 1; j < boxes.length; j++) {
        const [a, p] = boxes[i], [b, q] = boxes[j];
        if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom)
          found.overlaps.push([svg.getAttribute('aria-label'), a, b]);
      }
  }
  return found;
})()"""


def _where(page: browser.DevTools, selector: str) -> dict[str, float]:
    box: dict[str, float] = page.evaluate(
        f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
        " return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; })()")
    return box


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "width", "height", "scale", "mobile"),
                         [("phone", 390, 844, 3, True), ("desktop", 1280, 900, 1, False)])
def test_page_fits_the_screen_with_whole_words_in_cells_and_no_overlapping_chart_labels(
        tmp_path: Path, name: str, width: int, height: int, scale: float, mobile: bool) -> None:
    page = html.write(_report(), tmp_path / "report.html")
    with browser.DevTools(tmp_path / "profile") as chromium:
        chromium.open(page, width, height, scale, mobile)
        found: dict[str, Any] = chromium.evaluate(MEASURE)
        chromium.screenshot(tmp_path / f"{name}-top.png", 0, 0, width, height)
        for table, shot in (("table.alert-log", "this-week"), ("table.events", "story-events")):
            box = _where(chromium, table)
            chromium.screenshot(tmp_path / f"{name}-{shot}.png", 0, box["y"] - 30, width,
                                min(700, box["height"] + 30))
        for chart in ("svg.chart[aria-label='scratch: inodes used']",
                      "svg.chart[aria-label^='train: one bar']"):
            box = _where(chromium, chart)
            chromium.screenshot(tmp_path / f"{name}-{chart.split('=')[1][1:6]}.png", box["x"], box["y"],
                                box["width"], box["height"])
    assert found["viewport"] == width
    assert found["charts"] >= 6 and found["cells"] > 100
    assert found["width"] <= width, f"the page is {found['width']} px wide on a {width} px screen"
    assert found["narrow"] == [], found["narrow"][:10]
    assert found["overlaps"] == [], found["overlaps"][:10]
    assert found["outside"] == [], found["outside"][:10]
