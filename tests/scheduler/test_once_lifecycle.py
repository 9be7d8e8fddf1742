"""`run --once` applies the same lifecycle as a tick of the loop (issue 37 item 7): a
drop-in deleted with its alert open is resolved ("item removed from the config") and a
change queued in the inbox is applied, in both modes. A cron, scrontab or timer home runs
nothing but `run --once`, so this is what keeps its alerts from staying open for ever."""
from __future__ import annotations

import signal
import time

import pytest

from tests.helpers import wait_for
from tests.scheduler.conftest import Site, script
from tests.state.test_state_design import failing_site, lines
from watchdogs.scheduler.lock import Lock
from watchdogs.state import inbox


def resolved(site: Site) -> list[str]:
    return [line for line in lines(site) if "RESOLVED cron.hourly/fire" in line]


@pytest.mark.parametrize("mode", ["once", "loop"])
def test_a_deleted_dropins_alert_is_resolved_and_a_queued_silence_applied(site: Site, mode: str) -> None:
    failing_site(site)
    assert site.watchdogs("run", "--once").returncode == 2
    assert any("CRITICAL cron.hourly/fire" in line for line in lines(site)), lines(site)
    (site.cron / "cron.hourly" / "fire").unlink()
    site.dropin("fine", script("echo fine"))
    # As a `silence` from a login node queues it while no scheduler runs.
    queued = inbox.submit(site.state, "silence", {"item": "cron.daily/*", "seconds": 3600.0,
                                                   "reason": "disk swap"}, "someone", time.time())
    if mode == "once":
        done = site.watchdogs("run", "--once")
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        proc = site.popen("run")
        try:
            wait_for(lambda: resolved(site) and inbox.result(site.state, queued) is not None, timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    (line,) = resolved(site)
    assert "item removed from the config" in line
    answer = inbox.result(site.state, queued)
    assert answer is not None and answer.ok and answer.text.startswith("silence "), answer
    shown = site.watchdogs("silences").stdout
    assert "cron.daily/*" in shown and "disk swap" in shown, shown
    assert "No open alerts" in site.watchdogs("alerts").stdout
    # The next run resolves nothing again (the lifecycle told it once).
    assert site.watchdogs("run", "--once").returncode == 0
    assert len(resolved(site)) == 1


def test_with_the_state_held_by_a_scheduler_once_leaves_the_lifecycle_to_it(site: Site) -> None:
    failing_site(site)
    assert site.watchdogs("run", "--once").returncode == 2
    (site.cron / "cron.hourly" / "fire").unlink()
    queued = inbox.submit(site.state, "silence", {"item": "x/*", "seconds": 60.0, "reason": "r"}, "someone")
    lock = Lock(site.state)   # as a running scheduler holds it
    assert lock.acquire("job 4242 (chain)") is None
    try:
        done = site.watchdogs("run", "--once")
    finally:
        lock.release()
    assert "left to the scheduler holding the state: job 4242 (chain)" in done.stderr, done.stderr
    assert not resolved(site) and inbox.result(site.state, queued) is None
