"""The metrics textfile as the site's monitoring sees it: `watchdogs run --once` writes
watchdogs.prom, Debian's prometheus-node-exporter (its textfile collector) serves it over
HTTP, and prometheus_client's parser reads back the check states, the open alert, the
failing channel and the training's step, loss (NaN), throughput and checkpoint."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait_for
from trainguard.health.record import Finding, TrainingHealth
from trainguard.heartbeat import write_heartbeat
from watchdogs.scheduler.metrics import escape

NODE_EXPORTER = shutil.which("prometheus-node-exporter")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def node_exporter(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """The real collector on a free port, reading `textfiles/` (only the textfile collector:
    the other collectors would read the whole machine for nothing)."""
    if NODE_EXPORTER is None:
        pytest.skip("prometheus-node-exporter is not installed (make install-dev installs it as root)")
    folder = tmp_path / "textfiles"
    folder.mkdir()
    port = free_port()
    proc = subprocess.Popen([NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
                             f"--collector.textfile.directory={folder}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for(lambda: _get(url) is not None, 20, 0.1, "node_exporter serving")
        yield folder, url
    finally:
        proc.terminate()
        proc.wait(10)


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except OSError:
        return None


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_node_exporter_serves_the_watchdogs_metrics_and_they_parse(
        tmp_path: Path, node_exporter: tuple[Path, str]) -> None:
    folder, url = node_exporter
    beats = tmp_path / "hb"
    beats.mkdir()
    now = time.time()
    nan = Finding("nan_loss", "loss nan at step 420 (last finite 2.31 at step 400)", 420, now - 30)
    write_heartbeat(beats, 0, 420, "stopping", now=now - 20, health=TrainingHealth(
        loss=2.31, loss_step=400, nan_step=420, nan_value="nan", samples_per_s=310.5, unit="samples",
        baseline=320.0, checkpoint_step=400, checkpoint_time=now - 600, findings=(nan,)))
    config = tmp_path / "watchdogs.toml"
    config.write_text(f"""
[scheduler]
state_dir = "state"
metrics_dir = "{folder}"
[[notify]]
name = "hook"
type = "webhook"
url = "http://127.0.0.1:{free_port()}/refused"
[[check]]
name = "learning \\"run\\" 1"
type = "training"
heartbeats = "hb"
notify = ["hook"]
""")
    done = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(config), "run", "--once"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "NO_PROXY": "127.0.0.1"})
    assert done.returncode == 2, done.stdout + done.stderr      # CRITICAL: the NaN
    assert (folder / "watchdogs.prom").stat().st_mode & 0o777 == 0o644
    assert not [p for p in folder.iterdir() if p.name != "watchdogs.prom"]   # no leftover temp file
    served = wait_for(lambda: (t := _get(url)) and "watchdogs_training_step" in t and t, 20, 0.2,
                      "the textfile in node_exporter's output")
    got = samples(served)
    check = 'learning "run" 1'
    assert got["watchdogs_item_status"] == [({"item": check, "kind": "check"}, 2.0)]
    assert got["watchdogs_alert_open"] == [({"item": check, "status": "CRITICAL"}, 1.0)]
    assert got["watchdogs_alerts_open"] == [({}, 1.0)]
    assert got["watchdogs_channel_up"] == [({"channel": "hook"}, 0.0)]
    assert got["watchdogs_training_step"] == [({"check": check}, 420.0)]
    [(labels, loss)] = got["watchdogs_training_loss"]
    assert labels == {"check": check} and loss != loss        # NaN
    assert got["watchdogs_training_throughput"] == [({"check": check, "unit": "samples"}, 310.5)]
    assert got["watchdogs_training_throughput_baseline"] == [({"check": check, "unit": "samples"}, 320.0)]
    [(_, age)] = got["watchdogs_training_checkpoint_age_seconds"]
    assert 600 <= age < 900
    assert got["watchdogs_training_finding"] == [({"check": check, "kind": "nan_loss"}, 1.0)]
    # node_exporter itself reports whether it could read the file.
    assert ({}, 0.0) in got.get("node_textfile_scrape_error", [])


def test_label_values_are_escaped_as_the_text_format_requires() -> None:
    assert escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
