"""The state directory fills up (a real 2 MiB tmpfs filled with dd) or its database is
corrupt (a real file of garbage): the scheduler keeps running its checks, delivers
directly from memory through the channels that do not need that disk, and says
"state directory full/corrupt" at once; a corrupt database is moved aside, kept, and a
fresh one started. Never a traceback, never a silent stop."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site
from tests.selfwatch.conftest import fill, mail_config, mails


def said(smtp: SmtpServer, *words: str) -> str | None:
    return next((m for m in mails(smtp) if all(w in m for w in words)), None)


@pytest.mark.timeout(90)
def test_full_state_directory_is_said_at_once_and_alerts_still_go_out(
        site: Site, smtp: SmtpServer, tmpfs: Path) -> None:
    state = tmpfs / "state"
    mail_config(site, smtp, scheduler=f'state_dir = "{state}"',
                tables=f'[[check]]\nname = "scratch"\ntype = "disk"\npath = "{tmpfs}"\nevery = "1s"\n')
    site.config.write_text(site.config.read_text().replace('state_dir = "state"\n', "", 1))
    proc = site.popen("run")
    try:
        wait_for(lambda: "scratch: OK" in site.log(), timeout=30, what="the disk check to pass once")
        filler = fill(tmpfs)
        full = wait_for(lambda: said(smtp, "state directory full"), timeout=30, what="the state-full mail")
        critical = wait_for(lambda: said(smtp, "CRITICAL: scratch"), timeout=30,
                            what="the disk check's alert, delivered without the state database")
        assert proc.poll() is None  # still running
        filler.unlink()
        wait_for(lambda: said(smtp, "RESOLVED", "can be written again"), timeout=30, what="the all-clear")
        wait_for(lambda: said(smtp, "RESOLVED: scratch"), timeout=30, what="the disk alert's RESOLVED")
    finally:
        proc.terminate()
        proc.wait(20)
    assert str(state) in full
    assert "GiB" in critical or "MiB" in critical or "%" in critical
    assert "Traceback" not in site.log()
    assert proc.returncode == 0


@pytest.mark.timeout(120)
def test_an_alert_for_a_logfile_on_the_full_state_disk_waits_in_memory_and_arrives_whole_once(
        site: Site, smtp: SmtpServer, tmpfs: Path) -> None:
    """The README's layout: the alert log beside the state folder, on one filesystem. While it
    is full, the logfile channel fails every tick; more ticks than a channel's tries pass, the
    alert is kept all the same, and once space returns it is written once, whole, and says it
    was held."""
    state, alerts_log = tmpfs / "state", tmpfs / "watchdogs-alerts.log"
    mail_config(site, smtp, scheduler=f'state_dir = "{state}"',
                tables=f'[[check]]\nname = "scratch"\ntype = "disk"\npath = "{tmpfs}"\nevery = "1s"\n'
                       f'[[notify]]\nname = "log"\ntype = "logfile"\npath = "{alerts_log}"\n')
    site.config.write_text(site.config.read_text().replace('state_dir = "state"\n', "", 1))
    proc = site.popen("run")
    try:
        wait_for(lambda: "scratch: OK" in site.log(), timeout=30, what="the disk check to pass once")
        filler = fill(tmpfs)
        wait_for(lambda: said(smtp, "CRITICAL: scratch"), timeout=30, what="the disk alert by mail")
        wait_for(lambda: "kept in memory until it can be written" in site.log(), timeout=30,
                 what="the logfile's line held in memory")
        start = site.log().count("scratch: CRITICAL")
        # More ticks than a channel that fails by itself is tried (MAX_TRIES = 5).
        wait_for(lambda: site.log().count("scratch: CRITICAL") >= start + 7, timeout=60,
                 what="seven more ticks with the disk still full")
        assert "CRITICAL" not in (alerts_log.read_text() if alerts_log.exists() else "")  # no half line
        full = site.watchdogs("status")  # and status says why the view is old
        assert full.returncode == 2 and "state folder's filesystem full" in full.stdout.splitlines()[0]
        filler.unlink()
        wait_for(lambda: alerts_log.exists() and "delivered late" in alerts_log.read_text(), timeout=30,
                 what="the held alert in the log file")
    finally:
        proc.terminate()
        proc.wait(20)
    lines = alerts_log.read_text().splitlines()
    criticals = [line for line in lines if " CRITICAL scratch " in line]
    assert len(criticals) == 1, lines
    # Whole lines only, and the alert says it was held back.
    assert all(line.startswith(("20", "watchdogs: ")) for line in lines), lines
    held = lines[lines.index(criticals[0]) + 1]
    assert held.startswith("watchdogs: delivered late, held in memory since ") and "No space left" in held
    assert "dropped" not in site.log()
    assert "Traceback" not in site.log()


@pytest.mark.timeout(60)
def test_corrupt_state_database_is_moved_aside_and_a_fresh_one_started(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp)
    site.state.mkdir(mode=0o700)
    garbage = b"this is not an SQLite database\n" * 200
    (site.state / "state.sqlite3").write_bytes(garbage)
    proc = site.popen("run")
    try:
        news = wait_for(lambda: said(smtp, "state directory corrupt"), timeout=30,
                        what="the corrupt-state mail")
        wait_for(lambda: "scheduling " in site.log(), timeout=30, what="the scheduler's loop")
    finally:
        proc.terminate()
        proc.wait(20)
    kept = list(site.state.glob("state.sqlite3.corrupt-*"))
    assert [p.read_bytes() for p in kept if not p.name.endswith(("-wal", "-shm"))] == [garbage]
    assert "moved aside to" in news and kept[0].name in news
    status = site.watchdogs("status")
    # The scheduler was just stopped: nobody watches, which status says (WARNING for the
    # grace, then CRITICAL; issue 34), and it reads the fresh state without an error.
    assert status.returncode in (1, 2) and "BLIND since" in status.stdout and not status.stderr
    assert "Traceback" not in site.log()


@pytest.mark.timeout(60)
def test_run_once_on_a_full_state_directory_still_reports_without_a_traceback(
        site: Site, smtp: SmtpServer, tmpfs: Path) -> None:
    state = tmpfs / "state"
    mail_config(site, smtp, scheduler=f'state_dir = "{state}"',
                tables=f'[[check]]\nname = "scratch"\ntype = "disk"\npath = "{tmpfs}"\n')
    site.config.write_text(site.config.read_text().replace('state_dir = "state"\n', "", 1))
    assert site.watchdogs("run", "--once").returncode == 0  # the database exists, all is well
    fill(tmpfs)
    full = site.watchdogs("run", "--once")
    assert "Traceback" not in full.stderr
    assert full.stdout.startswith("CRITICAL scratch: ") and full.returncode == 2
    assert f"state directory {state} full" in full.stderr



def test_item_locks_on_a_full_state_directory_still_lock_without_the_holders_note(tmpfs: Path) -> None:
    from watchdogs.scheduler.itemlock import ItemLocks
    state = tmpfs / "state"
    state.mkdir()
    fill(tmpfs)
    mine, other = ItemLocks(state), ItemLocks(state)
    assert mine.acquire("cron.hourly/new-item") is None      # taken, though the note could not be written
    assert other.acquire("cron.hourly/new-item") == "another process"   # and it does exclude
    mine.release("cron.hourly/new-item")


def test_item_locks_in_a_broken_state_directory_let_the_item_run_unlocked(tmp_path: Path) -> None:
    from watchdogs.scheduler.itemlock import LOCKS_DIR, ItemLocks
    (tmp_path / LOCKS_DIR).write_text("not a folder")
    assert ItemLocks(tmp_path).acquire("check-a") is None


def test_a_logfile_line_that_does_not_fit_on_the_disk_is_not_left_half_written(tmpfs: Path) -> None:
    """tmpfs takes what fits (a page at a time), then ENOSPC: the half that fitted is cut back,
    the error says the disk is this machine's own (kept, not counted as a try)."""
    from notifiers.base import Message, TransportError
    from tests.notifiers.support import channel
    log = tmpfs / "alerts.log"
    notifier = channel(tmpfs.parent, f'[[notify]]\nname = "log"\ntype = "logfile"\npath = "{log}"\n')
    notifier.notify(Message("s", "first line\n"))
    filler = fill(tmpfs)
    os.truncate(filler, filler.stat().st_size - 8192)   # two pages free: part of the long line fits
    with pytest.raises(TransportError) as raised:
        notifier.notify(Message("s", "y" * 64 * 1024 + "\n"))
    assert raised.value.local and not raised.value.permanent
    assert log.read_text() == "first line\n"
    filler.unlink()
