"""Small lies and tracebacks of the command line: `watchdogs` alone lists the commands,
`-h` speaks to users, `status | head` ends quietly, counts are in good English."""
from __future__ import annotations

import subprocess
import sys

from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site
from tests.selfwatch.conftest import mail_config


def test_no_command_lists_the_commands(site: Site) -> None:
    done = subprocess.run([sys.executable, "-m", "watchdogs"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "the following arguments are required" not in done.stderr
    for command in ("start", "stop", "status", "validate", "run"):
        assert f"\n    {command} " in done.stderr


def test_help_speaks_to_users_not_developers() -> None:
    done = subprocess.run([sys.executable, "-m", "watchdogs", "-h"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    assert "error boundary" not in done.stdout and "CommandResult" not in done.stdout
    assert "watchdogs start" in done.stdout and "watchdogs status" in done.stdout


def test_status_piped_into_a_pager_that_quits_ends_without_a_traceback(site: Site) -> None:
    for n in range(20):
        site.dropin(f"probe{n}", "#!/bin/sh\necho ok\n")
    reader = subprocess.Popen(["head", "-n", "0"], stdin=subprocess.PIPE)
    assert reader.stdin is not None
    writer = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(site.config), "status"],
                            stdout=reader.stdin, stderr=subprocess.PIPE, text=True, timeout=60,
                            env=site.env())
    reader.stdin.close()
    reader.wait(10)
    assert "Traceback" not in writer.stderr and "BrokenPipeError" not in writer.stderr
    assert writer.returncode == 2  # no scheduler ever ran here: nothing watches, CRITICAL (issue 34)


def test_validate_counts_in_good_english(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp)
    done = site.watchdogs("validate")
    assert done.returncode == 0, done.stderr
    assert "0 checks (none); 1 channel (mail);" in done.stdout
