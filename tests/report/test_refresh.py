"""The running scheduler rewrites `<state_dir>/report.html` (at its first tick, then every
6 ticks: every 6 s with these tests' 1-second tick), and `status` says where it is."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.scheduler.conftest import Site, script
from watchdogs.commands import status
from watchdogs.report import refresh


@pytest.mark.timeout(90)
def test_the_scheduler_refreshes_the_page_and_status_shows_where(site: Site) -> None:
    site.dropin("count", script('echo "run $(date +%s%N)"'))
    page = site.state / "report.html"
    proc = site.popen("run")
    try:
        wait_for(lambda: page.exists() and "Heartbeat" in page.read_text(), timeout=30,
                 what="the scheduler to write the page")
        first = page.read_text()
        wait_for(lambda: page.read_text().count('class="run" data-status="OK"')
                 > first.count('class="run" data-status="OK"'), timeout=30,
                 what="a later tick to redraw the page with the drop-in's next run")
        assert "STALE" not in page.read_text()
        assert "running" in page.read_text()  # the live instance, in the watchdog's table
        shown = site.watchdogs("status")
        assert f"page: {page} (open it in a browser" in shown.stdout
        assert status.PAGE == refresh.PAGE
    finally:
        proc.send_signal(signal.SIGUSR1)
        proc.wait(30)
    assert not list(Path(site.state).glob(".report.html.*.tmp")), "a half-written page was left behind"
    assert "cannot refresh the status page" not in site.log()
