"""A file the user put in cron.d that will never run is a WARNING alert, once, with the
reason and the fix (issue 20 item 5): read from the delivered mail and the logfile line."""
from __future__ import annotations

from pathlib import Path

from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site
from tests.selfwatch.conftest import mails


def channels(site: Site, smtp: SmtpServer, log: Path) -> None:
    with site.config.open("a") as fh:
        fh.write(f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {smtp.port}\n'
                 'sender = "watchdogs@example.org"\nto = ["oncall@example.org"]\nhtml = false\n'
                 f'[[notify]]\nname = "file"\ntype = "logfile"\npath = "{log}"\n')


def test_refused_drop_ins_are_told_once_with_reason_and_fix(site: Site, tmp_path: Path) -> None:
    shared = site.dropin("shared", "#!/bin/sh\necho 'OK - shared'\n", mode=0o777)
    dangling = site.cron / "cron.hourly" / "gone"
    dangling.symlink_to(tmp_path / "no-such-script.sh")
    log = tmp_path / "alerts.log"
    with SmtpServer() as smtp:
        channels(site, smtp, log)
        first = site.watchdogs("run", "--once")
        second = site.watchdogs("run", "--once")
        texts = mails(smtp)
    assert first.returncode in (0, 1), first.stderr
    told = "\n".join(texts)
    assert f"{shared} will not run: " in told and "writable by" in told, told
    assert f"fix: chmod go-w {shared}" in told
    assert f"{dangling} will not run: " in told
    assert f"ls -l {dangling}" in told
    assert "WARNING" in texts[0].splitlines()[0]
    lines = log.read_text().splitlines()
    assert any(f"WARNING watchdogs:refused:{shared} " in line and "chmod go-w" in line
               for line in lines), lines
    assert sum(f"watchdogs:refused:{dangling} " in line for line in lines) == 1, "told once, not each run"
    assert len(smtp.received) == 1, "the second run says nothing new"
    assert second.returncode in (0, 1)
