"""The status page's headline uses the same verdict as `watchdogs status` (issue 34 item 3):
"All fine" only while someone watches; once the scheduler has ended, the page written from
the same state says the watchdog is BLIND, since when, and that nothing is checked. The
real foreground scheduler writes the page; `watchdogs report` rewrites it after it ended."""
from __future__ import annotations

import re
import signal

import pytest

from tests.helpers import wait_for
from tests.scheduler.conftest import Site, script


def headline(page: str) -> tuple[str, str]:
    found = re.search(r'<p class="headline (\w+)">([^<]*)</p>', page)
    assert found is not None, page[:2000]
    return found.group(1), found.group(2)


@pytest.mark.timeout(90)
def test_the_page_is_fine_while_watching_and_says_blind_once_nothing_watches(site: Site) -> None:
    site.write_config('heartbeat_stale = "2s"')
    site.dropin("ok", script("echo fine"))
    page = site.state / "report.html"
    proc = site.popen("run")
    try:
        wait_for(lambda: page.exists() and "Heartbeat" in page.read_text(), timeout=30,
                 what="the scheduler to write the page")
        kind, words = headline(page.read_text())
        assert kind == "fine" and words.startswith("All fine") and "the watchdog is watching" in words
        assert "Valid until" in page.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    # heartbeat_stale (2 s) caps the grace: blind is CRITICAL after it, and the page says so.
    wait_for(lambda: site.watchdogs("status").returncode == 2, timeout=30, what="status to say blind")
    done = site.watchdogs("report")
    assert done.returncode == 0 and "needs attention" in done.stdout, done.stdout
    kind, words = headline(page.read_text())
    assert kind == "bad" and "scheduler BLIND since" in words, words
    assert "Slurm was not asked whether a successor is queued" in words
    assert "<strong>BLIND</strong>: BLIND since" in page.read_text()
