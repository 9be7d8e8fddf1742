"""`watchdogs report` after real scheduler runs (a disk check on a folder, a failing
drop-in), opened in Debian's headless Chromium as a user opens the file: no console error,
no request beyond the file, the charts there with one point per recorded reading, and
screenshots at desktop and phone widths in the test's folder."""
from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report import browser
from tests.scheduler.conftest import Site, script

pytestmark = pytest.mark.skipif(browser.CHROMIUM is None,
                                reason="Debian's chromium is not installed (`make test-tools` installs it)")

RUNS = 3


def _page_from_runs(site: Site, tmp_path: Path) -> Path:
    site.dropin("gpu-check", script("echo 'GPU 2 idle <b>&amp;</b>'\nexit 2"))
    for n in range(RUNS):
        (site.root / "scratch" / f"file{n}").write_bytes(b"x" * 65536 * (n + 1))
        site.watchdogs("run", "--once")
    out = tmp_path / "report.html"
    done = site.watchdogs("report", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} (needs attention): "), done.stdout
    assert "1 not OK: cron.hourly/gpu-check CRITICAL" in done.stdout
    return out


def test_report_from_real_runs_loads_in_chromium_without_errors_or_outside_requests(
        site: Site, tmp_path: Path) -> None:
    page = _page_from_runs(site, tmp_path)
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "<script" not in html and "@import" not in html and "url(" not in html
    assert "GPU 2 idle &lt;b&gt;&amp;amp;&lt;/b&gt;" in html  # the drop-in's words, escaped once

    loaded = browser.load(page, tmp_path / "chromium")
    assert loaded.console == []
    assert loaded.requests == []
    recorded = sqlite3.connect(site.state / "state.sqlite3").execute(
        "SELECT COUNT(*) FROM disk_history WHERE check_name = 'scratch'").fetchone()[0]
    assert recorded == RUNS
    lines = re.findall(r'<polyline class="series" data-label="([^"]+)" data-points="(\d+)"'
                       r'[^>]*points="([^"]+)"', loaded.dom)
    assert [(label, int(n)) for label, n, _ in lines] == [("bytes used", RUNS), ("inodes used", RUNS)]
    assert all(len(points.split()) == RUNS for _, _, points in lines)
    bars = re.findall(r'<rect class="run" data-status="(\w+)"', loaded.dom)
    assert sorted(bars) == ["CRITICAL"] * RUNS + ["OK"] * RUNS
    assert "bytes used" in loaded.dom and "local time (" in loaded.dom
    assert re.search(r'class="levlab"[^>]*>warn [\d.]+ [KMGTP]iB<', loaded.dom)
    assert "Last updated" in loaded.dom

    for width, height, name in ((1280, 900, "desktop.png"), (390, 844, "phone.png")):
        shot = browser.screenshot(page, tmp_path / name, width, height)
        assert shot.stat().st_size > 10_000, f"{shot}: an empty page?"


def test_the_browser_check_sees_a_console_error_and_an_outside_request(tmp_path: Path) -> None:
    """The checks above can fail: a page that logs an error and loads an image from outside."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><img src="http://example.invalid/x.png">'
                    '<script>console.error("boom")</script></body></html>')
    loaded = browser.load(page, tmp_path / "chromium")
    assert any('"boom"' in line for line in loaded.console)
    assert loaded.requests == ["http://example.invalid/x.png"]


def test_report_refuses_a_folder_that_does_not_exist(site: Site, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(site.config), "report",
                           "--out", str(tmp_path / "nowhere" / "r.html")], capture_output=True, text=True,
                          env=site.env(), timeout=60)
    assert done.returncode != 0
    assert f"folder {tmp_path / 'nowhere'} does not exist" in done.stderr
    assert "Traceback" not in done.stderr
