"""`watchdogs run` as a real process getting real signals: USR1 lets the item in
progress finish, TERM cuts it off (it counts as not run and is caught up), and a killed
scheduler is reported loudly by `status`."""
from __future__ import annotations

import signal
import time

import pytest

from tests.helpers import wait_for
from tests.scheduler.conftest import Site, script
from watchdogs.scheduler.records import Records
from watchdogs.state.store import StateStore


def records(site: Site) -> Records:
    return Records(StateStore(site.state))


@pytest.mark.timeout(60)
def test_usr1_lets_the_item_in_progress_finish_then_exits_cleanly(site: Site) -> None:
    marks = site.root / "marks"
    site.dropin("slow", script(f"echo start >> {marks}\nsleep 2\necho end >> {marks}\necho 'slow done'"))
    proc = site.popen("run")
    try:
        wait_for(lambda: marks.exists(), timeout=15, what="the drop-in to start")
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(20) == 0
    finally:
        proc.kill()
    assert marks.read_text().split() == ["start", "end"]
    assert records(site).items()["cron.hourly/slow"]["last_summary"] == "slow done"
    assert records(site).latest_instance()["reason"] == "handover (SIGUSR1: time limit near)"


@pytest.mark.timeout(60)
def test_sigterm_cuts_off_the_run_and_the_next_start_catches_it_up(site: Site) -> None:
    first = site.root / "first"
    site.dropin("once-slow", script(f"if [ ! -e {first} ]; then touch {first}; sleep 60; fi\necho caught up"))
    site.write_config(hourly="1h")
    proc = site.popen("run")
    try:
        wait_for(lambda: first.exists(), timeout=15, what="the drop-in to start")
        started = time.monotonic()
        proc.terminate()
        assert proc.wait(15) == 0
        assert time.monotonic() - started < 8
    finally:
        proc.kill()
    history = records(site).history("cron.hourly/once-slow")
    assert [h["summary"] for h in history] == ["interrupted: the scheduler stopped"]
    assert records(site).items()["cron.hourly/once-slow"]["anchor"] is None  # counts as not run
    done = site.watchdogs("run", "--once", "--due")
    assert done.stdout.splitlines() == ["OK       cron.hourly/once-slow: caught up"]


@pytest.mark.timeout(60)
def test_killed_scheduler_is_reported_stale_loudly(site: Site) -> None:
    site.write_config('heartbeat_stale = "2s"')
    site.dropin("ok", script("echo fine"))
    proc = site.popen("run")
    try:
        wait_for(lambda: "running:" in site.watchdogs("status").stdout, timeout=15)
        proc.kill()  # no chance to say goodbye
        proc.wait(5)
        time.sleep(2.5)
        status = site.watchdogs("status")
    finally:
        proc.kill()
    assert status.returncode == 2
    assert "!!! HEARTBEAT STALE" in status.stdout and "is NOT running" in status.stdout


@pytest.mark.timeout(60)
def test_second_scheduler_on_the_same_state_refuses_to_start(site: Site) -> None:
    site.dropin("ok", script("echo fine"))
    proc = site.popen("run")
    try:
        wait_for(lambda: "running:" in site.watchdogs("status").stdout, timeout=15)
        second = site.watchdogs("run", timeout=20)
    finally:
        proc.terminate()
        proc.wait(15)
    assert second.returncode == 1
    assert "another scheduler instance runs on" in second.stderr and "watchdogs run (pid" in second.stderr


def test_stop_file_keeps_a_foreground_scheduler_from_starting(site: Site) -> None:
    site.state.mkdir()
    (site.state / "STOP").write_text("stopped\n")
    done = site.watchdogs("run", timeout=20)
    assert done.returncode == 1 and "stop file" in done.stderr and "not starting" in done.stderr
