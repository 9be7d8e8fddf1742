"""`watchdogs status` earns its OK (issues 34 and 35): a scheduler that ticks, a view that is
whole, an outbox that empties, someone watching. Each failure has its own words and Nagios
code. Real processes (the foreground scheduler, SIGSTOP, SIGTERM, a dead webhook); where
the scenario is a full cluster's pending successor, a fake `squeue` on PATH stands in for
it (a full cluster costs minutes; the words depend only on what squeue prints)."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import free_port, wait_for
from tests.scheduler.conftest import Site, script
from watchdogs.state import snapshot


def status(site: Site) -> subprocess.CompletedProcess[str]:
    return site.watchdogs("status", timeout=30)


def first(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout.splitlines()[0]


@pytest.mark.timeout(90)
def test_ok_while_ticking_critical_when_frozen_then_blind_when_ended(site: Site) -> None:
    site.write_config('heartbeat_stale = "3s"')
    site.dropin("ok", script("echo fine"))
    proc = site.popen("run")
    try:
        ok = wait_for(lambda: (d := status(site)).returncode == 0 and d, timeout=30, what="status OK")
        assert first(ok).startswith("WATCHDOGS OK: 0 open alerts; scheduler running |"), ok.stdout
        assert "tick_age=" in first(ok) and "blind=0s" in first(ok)
        proc.send_signal(signal.SIGSTOP)  # frozen: alive, but no tick
        frozen = wait_for(lambda: (d := status(site)).returncode == 2 and d, timeout=30, what="CRITICAL")
        assert "HEARTBEAT STALE" in first(frozen) and "WATCHDOGS CRITICAL: " in first(frozen)
        proc.send_signal(signal.SIGCONT)
        wait_for(lambda: status(site).returncode == 0, timeout=30, what="OK again")
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        proc.kill()
    # Ended: nobody watches. Told (WARNING) at once, CRITICAL after the grace.
    blind = wait_for(lambda: (d := status(site)).returncode == 2 and d, timeout=30, what="blind CRITICAL")
    assert first(blind).startswith("WATCHDOGS CRITICAL: scheduler BLIND since "), blind.stdout
    assert "scheduler  !!! BLIND since" in blind.stdout
    assert "nothing is checked until an instance runs" in blind.stdout


def test_never_started_is_critical_not_ok(site: Site) -> None:
    done = status(site)
    # Before: "WATCHDOGS OK: 0 open alerts; scheduler not running", exit 0.
    assert done.returncode == 2, done.stdout
    assert first(done).startswith("WATCHDOGS CRITICAL: scheduler never started: nothing watches; "
                                  "0 open alerts")
    assert "run `watchdogs start`" in done.stdout


def _chain_view(site: Site, ended_ago: float) -> None:
    """A view whose latest instance is chain job 100, ended `ended_ago` seconds ago at a
    handover: written by a real scheduler, then its instance row turned into the chain's."""
    site.dropin("ok", script("echo fine"))
    proc = site.popen("run")
    try:
        wait_for(lambda: status(site).returncode == 0, timeout=30, what="a view")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    db = sqlite3.connect(site.state / snapshot.VIEW_NAME)
    ended = time.time() - ended_ago
    db.execute("UPDATE sched_instances SET mode = 'chain', job_id = '100', ended = ?, heartbeat = ?,"
               " reason = 'handover'", (ended, ended))
    db.commit()
    db.close()


def _fake_squeue(folder: Path, lines: str, monkeypatch: pytest.MonkeyPatch) -> None:
    folder.mkdir()
    fake = folder / "squeue"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{lines}EOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


@pytest.mark.timeout(90)
def test_blind_behind_a_pending_successor_says_since_when_and_why(site: Site, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _chain_view(site, ended_ago=600)
    expected = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 3600))
    _fake_squeue(tmp_path / "bin", f"100|{site.job_name}|COMPLETED|None|N/A|N/A|N/A|watchdogs:start:\n"
                                   f"101|{site.job_name}|PENDING|Priority|{expected}|N/A|N/A|watchdogs:rescue:100\n",
                 monkeypatch)
    done = status(site)
    assert done.returncode == 2, done.stdout
    head = first(done)
    assert head.startswith("WATCHDOGS CRITICAL: scheduler BLIND since "), head
    assert f"successor job 101 PENDING (Priority), Slurm expects it at {expected[11:16]}" in head
    assert "blind=6" in head  # about 600 s


def test_a_cancelled_chain_says_nothing_is_queued_and_the_command(site: Site, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _chain_view(site, ended_ago=600)
    _fake_squeue(tmp_path / "bin", f"100|{site.job_name}|CANCELLED|None|N/A|N/A|N/A|watchdogs:start:\n",
                 monkeypatch)
    done = status(site)
    assert done.returncode == 2
    assert "chain cancelled, nothing queued: run `watchdogs start`" in first(done)


def test_a_stuck_outbox_is_said_with_its_channel_and_error(site: Site) -> None:
    site.write_config(f'[[notify]]\nname = "hook"\ntype = "webhook"\nurl = "http://127.0.0.1:{free_port()}/"\n'
                      'timeout = "1s"\n')
    site.dropin("fire", script("echo 'disk on fire'\nexit 2"))
    assert site.watchdogs("run", "--once").returncode == 2
    view = site.state / snapshot.VIEW_NAME
    fresh = status(site)
    assert "outbox stuck" not in fresh.stdout  # just queued: not stuck yet
    db = sqlite3.connect(view)  # the view as if that message had waited ten minutes
    db.execute("UPDATE outbox SET created = created - 600")
    db.commit()
    db.close()
    done = status(site)
    head = first(done)
    assert done.returncode == 2, done.stdout
    assert "outbox stuck: 1 alert message not handed to hook for up to 10m" in head, head
    assert "no channel delivers: alerts reach nobody" in head and "oldest_outbox=6" in head
    assert "outbox     !!! outbox stuck" in done.stdout
