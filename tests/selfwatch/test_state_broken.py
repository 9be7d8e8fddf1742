"""The state directory fills up (a real 2 MiB tmpfs filled with dd) or its database is
corrupt (a real file of garbage): the scheduler keeps running its checks, delivers
directly from memory through the channels that do not need that disk, and says
"state directory full/corrupt" at once; a corrupt database is moved aside, kept, and a
fresh one started. Never a traceback, never a silent stop."""
from __future__ import annotations

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
