"""The acceptance scenario of the status page on the dev cluster: a training (train-requeue.slurm,
as the test user) goes through two requeues, a real tmpfs fills, an administrator drains a
node; real scheduler runs (`watchdogs run --once`) record it, and the page, opened in Debian's
headless Chromium, shows the timeline with both requeues and the end, with the job id, the step curve
with checkpoints, the disk curve with its forecast, and the drain with its reason, with no
console error and no outside request. Screenshots at desktop and phone widths go into the
test's folder.

What is not real: time. The disk forecast needs readings an hour apart; the first reading
(the empty tmpfs, taken by the real check) is moved an hour back in the state database."""
from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checks.test_nodes import Nodes
from tests.helpers import accounted, left_the_queue, sh, tmpfs, wait_for
from tests.report import browser
from tests.report.conftest import look
from tests.scheduler.conftest import Site
from tests.trainguard.support import REQUEUE_SCRIPT, Cluster, read_steps, wait_for_step

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(browser.CHROMIUM is None,
                                 reason="Debian's chromium is not installed (`make test-tools` installs it)")]
FAST_HEALTH = {"TRAINGUARD_HEALTH_WINDOW": "2s", "TRAINGUARD_HEALTH_WARMUP": "2s",
               "TRAINGUARD_HEARTBEAT_EVERY": "1s"}


@pytest.fixture
def nodes(slurm_cluster: Path) -> Iterator[Nodes]:
    tracker = Nodes()
    try:
        yield tracker
    finally:
        for node in tracker.touched:
            tracker.resume(node)


def _config(site: Site, job_name: str, heartbeats: Path) -> None:
    site.write_config(
        f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{job_name}"\n'
        f'[[check]]\nname = "learning"\ntype = "training"\nheartbeats = "{heartbeats}"\njob = "train"\n'
        '[[check]]\nname = "scratch"\ntype = "disk"\npath = "scratch"\nwarn = "80%"\ncrit = "90%"\n'
        '[[check]]\nname = "nodes"\ntype = "nodes"\npartition = "debug"\n')


def _fill(scratch: Path, mib: int) -> None:
    (scratch / f"fill-{mib}").write_bytes(b"\0" * (mib << 20))


def _requeue(cluster: Cluster, job: str, steps: Path, restart: int, site: Site) -> None:
    """The time-limit warning's signal, as Slurm sends it; the template requeues on exit 140.
    One look while it waits again, one once it runs on."""
    before = read_steps(steps)[-1]
    sh("scancel", "--batch", "--signal=USR1", job)
    wait_for(lambda: cluster.field(job, "Restarts") == str(restart) and cluster.state(job) == "PENDING",
             90, 0.25, f"job {job} requeued ({restart}) and pending")
    look(site)
    cluster.release_when_requeued(job, restart)
    wait_for_step(steps, before + 15, timeout=90)
    look(site)


def _db(site: Site) -> sqlite3.Connection:
    return sqlite3.connect(site.state / "state.sqlite3")


@pytest.mark.timeout(480)
def test_two_requeues_a_filling_tmpfs_and_a_drain_are_on_the_page_chromium_renders_cleanly(
        site: Site, cluster: Cluster, nodes: Nodes, tmp_path: Path) -> None:
    name = f"story-{uuid.uuid4().hex[:8]}"   # accounting keeps earlier runs' jobs: a name of its own
    run, steps = tmp_path / "run", tmp_path / "steps"
    _config(site, name, run / "heartbeat")
    with tmpfs(site.root / "scratch", "16m") as scratch:
        look(site)                                   # the empty tmpfs, no job yet
        with _db(site) as db:
            db.execute("UPDATE disk_history SET t = t - 3600 WHERE check_name = 'scratch'")
        job = cluster.sbatch(REQUEUE_SCRIPT, "--steps", "100000", "--step-sleep", "0.05",
                             "--save-every", "20", "--step-log", str(steps),
                             sbatch_args=("-o", str(tmp_path / "out.log"), "-J", name, "-p", "cpu"),
                             env={"RUN_DIR": str(run), **FAST_HEALTH})
        wait_for_step(steps, 100, timeout=120)
        look(site)
        _fill(scratch, 4)
        _requeue(cluster, job, steps, 1, site)
        _fill(scratch, 5)
        _requeue(cluster, job, steps, 2, site)
        nodes.drain("node2", "report test: fan failure")
        look(site)
        sh("scancel", job)                            # the user ends it: saved, then gone
        wait_for(lambda: accounted(job), 60, 0.5, f"job {job} in accounting")
        wait_for(lambda: left_the_queue(job), 120, 0.5, f"job {job} gone from squeue")
        look(site)
        page = tmp_path / "report.html"
        done = site.watchdogs("report", "--out", str(page))
        assert done.returncode == 0, done.stderr

    with _db(site) as db:
        kinds = [r[0] for r in db.execute("SELECT kind FROM story_events WHERE item = 'train'"
                                          " ORDER BY t, rowid")]
        samples = db.execute("SELECT COUNT(*) FROM training_samples WHERE item = 'train'").fetchone()[0]
        readings = db.execute("SELECT COUNT(*) FROM disk_history WHERE check_name = 'scratch'").fetchone()[0]
    assert kinds == ["running", "requeued", "running", "requeued", "running", "ended"]
    assert samples == 7 and readings == 8   # every look but the first (no job yet) has heartbeats

    loaded = browser.load(page, tmp_path / "chromium")
    assert loaded.console == [] and loaded.requests == []
    dom = loaded.dom
    rows = re.findall(r'<tr><td class="when">[^<]+</td><td><span class="status"[^>]*>(\w+)</span></td>'
                      r'<td data-label="Job">(\d+)</td>'
                      r'<td class="summary">([^<]*)</td></tr>', dom)
    assert [(kind, job_id) for kind, job_id, _ in rows if kind == "requeued"] == [("requeued", job)] * 2
    assert "(2 requeues this week)" in dom
    (cause,) = [cause for kind, job_id, cause in rows if kind == "ended" and job_id == job]
    assert f"(job {job})" in cause and "cancel" in cause.lower(), cause
    lines = dict(re.findall(r'<polyline class="series" data-label="([^"]+)" data-points="(\d+)"', dom))
    assert lines["step"] == str(samples)
    assert {"throughput", "loss", "bytes used", "bytes used forecast", "drained", "down"} <= set(lines)
    assert int(lines["bytes used"]) == readings
    assert len(re.findall(r'<circle class="point" data-label="checkpoint saved"', dom)) >= 3
    # On each of the step, throughput and loss charts.
    assert len(re.findall(r'class="marklab"[^>]*>requeued \d\d:\d\d<', dom)) == 2 * 3
    assert len(re.findall(r'class="marklab"[^>]*>ended \d\d:\d\d<', dom)) == 3
    assert re.search(r"Forecast \(bytes, dashed\):\s*warn \w{3} \d\d \w{3} \d\d:\d\d", dom), "no forecast"
    assert re.search(r"<td>node2</td><td>drained</td><td[^>]*>report test: fan failure</td>", dom)
    assert "local time (" in dom and re.search(r">(samples|steps)/s<", dom)
    for width, height, shot in ((1280, 2400, "desktop.png"), (390, 3000, "phone.png")):
        assert browser.screenshot(page, tmp_path / shot, width, height).stat().st_size > 10_000

