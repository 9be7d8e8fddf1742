"""The inbox is a trust boundary: a group mate (`wdpeer`, tests/helpers.as_peer) must not be
able to silence, ack or resolve in your name, nor freeze or block the scheduler with what
it puts there; neither may anything in the inbox that is not a regular file of yours."""
from __future__ import annotations

import json
import os
import pwd
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import as_peer, unix_socket_at, wait_for
from tests.scheduler.conftest import Site, script
from watchdogs import ownfiles
from watchdogs.state import inbox

LOGFILE = '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n'


def lines(site: Site) -> list[str]:
    path = site.root / "alerts.log"
    return path.read_text().splitlines() if path.exists() else []


def command_bytes(verb: str = "silence", author: str = "victim", **args: object) -> str:
    args = args or {"item": "*", "seconds": 365 * 86400, "reason": "planned maintenance"}
    return json.dumps({"verb": verb, "args": args, "author": author, "host": "x", "created": time.time()})


def silence_rows(site: Site) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(site.state / "state.sqlite3")
    try:
        return [tuple(r) for r in db.execute("SELECT pattern, author, reason FROM silences")]
    finally:
        db.close()


@pytest.fixture
def running(site: Site) -> Iterator[subprocess.Popen[str]]:
    """A foreground scheduler (1 s tick) with a logfile channel and one failing drop-in,
    its first alert out: the inbox exists (made by the watchdog) and is being polled."""
    site.write_config(LOGFILE)
    site.dropin("fire", script("echo 'disk on fire'\nexit 2"))
    proc = site.popen("run")
    try:
        wait_for(lambda: any("CRITICAL cron.hourly/fire" in line for line in lines(site)), timeout=30,
                 what="the first alert")
        ownfiles.make_dirs(inbox.folder(site.state) / inbox.DONE)  # as the first command makes it
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def me() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def assert_applied(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0 and "applied by the scheduler instance" in done.stdout, \
        done.stdout + done.stderr


def queued(box: Path) -> list[str]:
    return sorted(n for n in os.listdir(box) if n.endswith(".json"))


def heartbeat_age(site: Site) -> float:
    db = sqlite3.connect(site.state / "view.sqlite3")
    try:
        beat = db.execute("SELECT MAX(heartbeat) FROM sched_instances").fetchone()[0]
    finally:
        db.close()
    return time.time() - float(beat)


def test_entries_that_are_not_your_regular_files_are_set_aside_and_never_block_the_queue(
        site: Site, running: subprocess.Popen[str]) -> None:
    """Every kind of entry that is not a command file of yours, each named to sort before
    the real command: a FIFO (which froze the scheduler), a folder (which blocked the queue
    for ever), links to a valid command of yours and to nothing, a socket, an oversized file.
    The scheduler goes on ticking, the real `silence` is applied, and one WARNING names them."""
    box = inbox.folder(site.state)
    valid = site.root / "mine.json"
    valid.write_text(command_bytes())
    os.mkfifo(box / "000-fifo.json")
    (box / "001-folder.json").mkdir()
    (box / "002-link.json").symlink_to(valid)
    (box / "003-dangling.json").symlink_to(site.root / "nothing-here")
    with unix_socket_at(box / "004-socket.json"):
        pass
    (box / "005-huge.json").write_bytes(b" " * (inbox.MAX_COMMAND_BYTES + 1))
    (box / b"006-caf\xe9.json".decode("utf-8", "surrogateescape")).mkdir()
    made = site.watchdogs("silence", "cron.hourly/*", "--for", "1h", "--reason", "disk swap")
    assert_applied(made)
    assert heartbeat_age(site) < 5, "the scheduler stopped ticking"
    assert silence_rows(site) == [("cron.hourly/*", me(), "disk swap")]
    assert queued(box) == []
    aside = os.listdir(box / "rejected")
    assert len(aside) == 7, aside
    warned = wait_for(lambda: [line for line in lines(site) if "WARNING watchdogs:inbox:rejected" in line],
                      timeout=15, what="the inbox WARNING")
    assert len(warned) == 1, warned
    said = (site.root / "alerts.log").read_text()
    for kind in ("a FIFO", "2 folders", "2 symlinks", "a socket", "a regular file"):
        assert kind in said, (kind, said)
    done = site.watchdogs("alerts")
    assert "watchdogs:inbox:rejected" in done.stdout, done.stdout


def test_what_a_command_set_aside_without_a_scheduler_is_told_when_the_scheduler_starts(site: Site) -> None:
    """No scheduler: `silence` applies the queue itself and moves a FIFO aside (it has no
    channels to tell); the scheduler, once started, tells it with the FIFO's owner."""
    site.write_config(LOGFILE)
    ownfiles.make_dirs(inbox.folder(site.state) / inbox.DONE)
    os.mkfifo(inbox.folder(site.state) / "000-fifo.json")
    done = site.watchdogs("silence", "x", "--for", "1h")
    assert done.returncode == 0 and "applied directly" in done.stdout, done.stdout + done.stderr
    assert len(os.listdir(inbox.folder(site.state) / "rejected")) == 1
    proc = site.popen("run")
    try:
        told = wait_for(lambda: [line for line in lines(site) if "WARNING watchdogs:inbox:rejected" in line],
                        timeout=30, what="the inbox WARNING")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert f"a FIFO of {me()}" in told[0], told


def test_a_command_that_cannot_be_applied_is_answered_and_the_next_one_applies(
        site: Site, running: subprocess.Popen[str]) -> None:
    """Regular files of yours that are not valid commands (not JSON, NaN or endless seconds,
    arguments of the wrong type) are answered with the error, never retried for ever."""
    box = inbox.folder(site.state)
    bad = {"000-text.json": "not json",
           "001-nan.json": command_bytes(item="*", seconds=float("nan")),
           "002-inf.json": '{"verb": "silence", "args": {"item": "*", "seconds": 1e999}}',
           "003-type.json": command_bytes(item=["*"], seconds=60),
           "004-expire.json": command_bytes("expire", id="1; DROP")}
    for name, text in bad.items():
        (box / name).write_text(text)
    made = site.watchdogs("silence", "cron.hourly/*", "--for", "1h")
    assert_applied(made)
    assert [r[0] for r in silence_rows(site)] == ["cron.hourly/*"]
    for name in bad:
        answer = json.loads((box / "done" / name).read_text())
        assert answer["ok"] is False and answer["text"], (name, answer)


def test_a_reason_with_line_breaks_forges_no_line_in_the_answer_the_log_or_the_database(
        site: Site, running: subprocess.Popen[str]) -> None:
    """Reasons and patterns are cleaned once where the command is applied: what is stored,
    echoed to the sender and sent as the RESOLVED summary holds no line break or escape."""
    forged = "x\nWATCHDOGS CRITICAL forged\r\x1b]8;;http://evil\x07"
    silenced = site.watchdogs("silence", "nothing*", "--for", "1h", "--reason", forged)
    assert_applied(silenced)
    resolved = site.watchdogs("resolve", "cron.hourly/fire", "--reason", forged)
    assert_applied(resolved)
    wait_for(lambda: any("RESOLVED cron.hourly/fire" in line for line in lines(site)), timeout=15,
             what="the RESOLVED message")
    for text in (silenced.stdout, resolved.stdout, (site.root / "alerts.log").read_text()):
        assert not any(line.lstrip().startswith(("WATCHDOGS CRITICAL forged", "CRITICAL forged"))
                       for line in text.splitlines()), text
        assert "\x1b" not in text and "\r" not in text
    assert all("\n" not in r[2] and "\x1b" not in r[2] for r in silence_rows(site))


def test_the_author_of_a_command_is_its_files_owner_not_what_it_claims(site: Site) -> None:
    from watchdogs.scheduler.inbox import apply_pending
    from watchdogs.state.store import StateStore

    store = StateStore(site.state)
    inbox.submit(site.state, "silence", {"item": "a*", "seconds": 60, "reason": "r"}, "root")
    apply_pending(store, site.state, "test", time.time())
    assert [r[1] for r in silence_rows(site)] == [me()]


def test_a_silence_from_a_host_whose_clock_is_off_lasts_its_duration_from_receipt(
        site: Site, running: subprocess.Popen[str]) -> None:
    """The login node's clock 2 h behind, then 2 h ahead: the silence still runs for its hour
    from when the scheduler applies it, its end is the scheduler's, and the skew is said."""
    for shift, way in ((-7200, "ahead of"), (7200, "behind")):
        wrapper = (f"import sys, time; real = time.time; time.time = lambda: real() + {shift}; "
                   "from watchdogs.cli import main; sys.exit(main())")
        done = subprocess.run([sys.executable, "-c", wrapper, "--config", str(site.config), "silence",
                               f"shift{shift}", "--for", "1h"], capture_output=True, text=True, timeout=60,
                              env=site.env(), cwd=site.root)
        assert done.returncode == 0, done.stdout + done.stderr
        said = re.search(r"the scheduler's clock is (\S+ h \S+ min) (ahead of|behind) this host's",
                         done.stdout)
        assert said and said[1] in ("2 h 00 min", "1 h 59 min") and said[2] == way, done.stdout
        db = sqlite3.connect(site.state / "state.sqlite3")
        starts, ends = db.execute("SELECT starts, ends FROM silences WHERE pattern = ?",
                                  (f"shift{shift}",)).fetchone()
        db.close()
        assert abs(starts - time.time()) < 30 and ends - starts == 3600


def test_a_command_queued_by_an_earlier_version_is_still_applied_once(site: Site) -> None:
    """Before, a silence started at the command's `created` and was found again by it; now
    it starts on receipt. A command applied by the old version, then again after the
    upgrade (a crash before its file went), still makes one silence."""
    from watchdogs.alerts import schema, silences
    from watchdogs.scheduler.inbox import apply_pending
    from watchdogs.state.store import StateStore

    store = StateStore(site.state)
    schema.ensure(store)
    command = inbox.submit(site.state, "silence", {"item": "a*", "seconds": 60, "reason": "r"}, me())
    with store.transaction() as db:  # what the earlier version stored
        silences.add(db, "a*", command.created, command.created + 60, "r", me())
    apply_pending(store, site.state, "test", time.time() + 5)
    assert store.connection().execute("SELECT COUNT(*) FROM silences").fetchone()[0] == 1


def test_a_group_writable_inbox_is_refused_then_what_the_group_mate_left_is_set_aside(
        site: Site, running: subprocess.Popen[str], peer: str) -> None:
    """The inbox made 0775 (an earlier version under umask 002): the group mate drops a
    command silencing everything for a year "by" you, a FIFO, a folder and a link. The
    running scheduler applies nothing from it and says CRITICAL with the fix; the next
    command of yours tightens the folder (a mode the watchdog made itself), and what the
    group mate left is set aside with one WARNING naming them: none of it is applied."""
    box = inbox.folder(site.state)
    box.chmod(0o775)
    as_peer("write", box / "000-evil.json", command_bytes())
    as_peer("mkfifo", box / "001-fifo.json")
    as_peer("mkdir", box / "002-dir.json")
    as_peer("symlink", box / "003-link.json", str(site.root / "nothing"))
    refused = wait_for(lambda: [line for line in lines(site) if " CRITICAL watchdogs:inbox " in line],
                       timeout=15, what="the inbox refused")
    assert f"chmod go-w {box}" in (site.root / "alerts.log").read_text(), refused
    assert silence_rows(site) == []
    made = site.watchdogs("silence", "cron.hourly/*", "--for", "1h")
    assert_applied(made)
    assert "umask 002; now 0700" in made.stderr
    assert stat.S_IMODE(box.stat().st_mode) == 0o700
    assert [r[0] for r in silence_rows(site)] == ["cron.hourly/*"]
    warned = wait_for(lambda: [line for line in lines(site) if "WARNING watchdogs:inbox:rejected" in line],
                      timeout=15, what="the inbox WARNING")
    said = (site.root / "alerts.log").read_text()
    assert len(warned) == 1 and f"of {peer}" in said and "a FIFO" in said, said
    wait_for(lambda: any(" RESOLVED watchdogs:inbox " in line for line in lines(site)), timeout=15,
             what="the refusal resolved")
    # The group mate's folder (0755: we may not change its "..") cannot be moved: it stays,
    # skipped, told once; everything else went aside.
    assert len(os.listdir(box / "rejected")) == 3 and queued(box) == ["002-dir.json"] or \
        len(os.listdir(box / "rejected")) == 4, os.listdir(box)
    assert "could not be moved aside; skipped" in site.log() or len(os.listdir(box / "rejected")) == 4
    assert_applied(site.watchdogs("silence", "again", "--for", "1h"))
    assert len([line for line in lines(site) if "WARNING watchdogs:inbox:rejected" in line]) == 1


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o2770])
def test_an_inbox_others_can_write_in_a_mode_the_watchdog_never_made_is_refused_with_the_fix(
        site: Site, mode: int) -> None:
    site.write_config()
    assert site.watchdogs("run", "--once").returncode in (0, 1, 2)
    box = inbox.folder(site.state)
    box.mkdir(exist_ok=True)
    box.chmod(mode)
    for argv in (("silence", "x", "--for", "1h"), ("status",)):
        done = site.watchdogs(*argv)
        assert done.returncode == 2 and f"chmod go-w {box}" in done.stderr, (argv, done.stdout, done.stderr)
    assert stat.S_IMODE(box.stat().st_mode) == mode
