"""Bytes that are not UTF-8, from outside: a drop-in's file name, what a drop-in prints, a
job name from Slurm. Each is decoded once where it comes in, shown with the undecodable
bytes visible (`caf\\xe9`), never fails a write to the database, a log or a channel, and
never keeps the other alerts of the tick from going out."""
from __future__ import annotations

import os

import pytest

from tests.helpers import wait_for
from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site, script
from tests.selfwatch.conftest import mail_config, mails


def with_logfile(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp, tables=f'[[notify]]\nname = "log"\ntype = "logfile"\n'
                                   f'path = "{site.root / "alerts.log"}"\n')


def plant(site: Site, name: bytes, body: str, folder: str = "cron.hourly") -> None:
    """A drop-in whose file name is these bytes (the OS takes any but '/' and NUL)."""
    path = os.fsencode(site.cron / folder) + b"/" + name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w") as fh:
        fh.write(body)


def shown(name: bytes) -> str:
    """How a name is shown: valid UTF-8 as itself, every other byte as `\\xNN`."""
    return name.decode("utf-8", "backslashreplace")


NAMES = [b"caf\xe9", b"\xff\xfe", b"x\x80y", b"\xc0\xaf", b"ok\xed\xa0\x80"]
"""A Latin-1 byte, a UTF-16 byte order mark, a lone continuation byte, an overlong '/', and
an encoded surrogate (which Python's UTF-8 refuses too)."""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", NAMES, ids=lambda n: n.hex())
def test_a_drop_in_named_with_bytes_that_are_not_utf8_is_refused_told_and_the_rest_delivered(
        site: Site, smtp: SmtpServer, name: bytes) -> None:
    with_logfile(site, smtp)
    plant(site, name, script("echo 'OK - would run'\nexit 0"))
    site.dropin("broken", script("echo 'CRITICAL - a real problem'\nexit 2"))
    once = site.watchdogs("run", "--once")
    assert "Traceback" not in once.stderr, once.stderr
    assert "surrogates" not in once.stdout + once.stderr
    logfile = (site.root / "alerts.log").read_text()
    got = "\n".join(mails(smtp))
    visible = shown(name)
    for text in (logfile, got):
        assert "cron.hourly/broken" in text and "a real problem" in text, text
        assert f"cron.hourly/{visible}" in text and "not UTF-8" in text, text
    status = site.watchdogs("status")
    alerts = site.watchdogs("alerts")
    assert f"cron.hourly/{visible}" in status.stdout, status.stdout
    assert f"cron.hourly/{visible}" in alerts.stdout, alerts.stdout
    assert "cron.hourly/broken" in alerts.stdout


@pytest.mark.timeout(120)
def test_the_foreground_scheduler_keeps_delivering_after_a_name_that_is_not_utf8(
        site: Site, smtp: SmtpServer) -> None:
    with_logfile(site, smtp)
    plant(site, b"caf\xe9", script("exit 0"))
    proc = site.popen("run")
    try:
        wait_for(lambda: "caf\\xe9" in "\n".join(mails(smtp)), timeout=60, what="the refusal's mail")
        # A new problem after the refusal is delivered too: the loop did not go quiet.
        site.dropin("later", script("echo 'CRITICAL - came later'\nexit 2"))
        wait_for(lambda: "came later" in "\n".join(mails(smtp)), timeout=60, what="a later alert's mail")
    finally:
        proc.terminate()
        proc.wait(20)
    assert "surrogates" not in site.log() and "Traceback" not in site.log(), site.log()


@pytest.mark.timeout(120)
def test_bytes_a_drop_in_prints_are_stored_and_shown_visible_with_escapes(
        site: Site, smtp: SmtpServer) -> None:
    with_logfile(site, smtp)
    site.dropin("latin", script("printf 'CRITICAL - caf\\351 \\377 \\033[2J gone\\n"
                                "detail \\300\\257 \\342\\200\\256 end\\n'\nexit 2"))
    once = site.watchdogs("run", "--once")
    assert once.returncode in (0, 1, 2), once.stderr
    assert "Traceback" not in once.stderr
    logfile = (site.root / "alerts.log").read_text()
    alerts = site.watchdogs("alerts").stdout
    body = "\n".join(mails(smtp))
    for text in (logfile, alerts, body):
        assert "caf\\xe9 \\xff \\x1b[2J gone" in text, text
        assert "\x1b" not in text and "\ufffd" not in text
    assert "detail \\xc0\\xaf \\u202e end" in body


@pytest.mark.timeout(120)
def test_a_watched_log_named_with_a_byte_that_is_not_utf8_is_judged_and_shown(
        site: Site, smtp: SmtpServer) -> None:
    """Another source: a file name a glob matched (the filesystem probe's answer, JSON)."""
    import time

    mail_config(site, smtp, tables='[[check]]\nname = "train"\ntype = "log_stale"\n'
                                   f'path = "{site.root}/logs/train-*.out"\nmax_age = "10m"\n'
                                   f'[[notify]]\nname = "log"\ntype = "logfile"\n'
                                   f'path = "{site.root / "alerts.log"}"\n')
    (site.root / "logs").mkdir()
    log = os.fsencode(site.root / "logs") + b"/train-caf\xe9.out"
    with open(log, "w") as fh:
        fh.write("iter 1\n")
    old = time.time() - 3600
    os.utime(log, (old, old))
    once = site.watchdogs("run", "--once")
    assert "Traceback" not in once.stderr and "surrogates" not in once.stderr, once.stderr
    logfile = (site.root / "alerts.log").read_text()
    assert "train-caf\\xe9.out" in logfile, logfile
    assert "train-caf\\xe9.out" in "\n".join(mails(smtp))
    assert "train-caf\\xe9.out" in site.watchdogs("status").stdout
