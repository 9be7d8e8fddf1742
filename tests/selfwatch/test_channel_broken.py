"""One channel that cannot be built (its secret file made 0644, its environment variable
missing) is disabled alone: the scheduler starts, every check and every other channel
keeps working, the others are told, and `status` says so."""
from __future__ import annotations

import os

import pytest

from tests.helpers import wait_for
from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site, script
from tests.selfwatch.conftest import mail_config, mails


def with_pager(site: Site, smtp: SmtpServer, secret: str) -> None:
    """Mail works; "pager" (a webhook) has the broken secret."""
    mail_config(site, smtp, tables=f'[[notify]]\nname = "pager"\ntype = "webhook"\n'
                                   f'url = "http://127.0.0.1:9/hook"\n{secret}\n')


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["file 0644", "env var missing"])
def test_a_channel_with_a_bad_secret_is_disabled_alone_and_said_on_the_others(
        site: Site, smtp: SmtpServer, how: str) -> None:
    if how == "file 0644":
        token = site.root / "pager-token"
        token.write_text("s3cr3t-token-value\n")
        token.chmod(0o644)  # a colleague's chmod
        with_pager(site, smtp, f'token_file = "{token}"')
    else:
        os.environ.pop("WD_TEST_PAGER_TOKEN", None)
        with_pager(site, smtp, 'token_env = "WD_TEST_PAGER_TOKEN"')
    site.dropin("gpu", script("echo 'CRITICAL - GPU 3 fell off the bus'\nexit 2"))
    proc = site.popen("run")
    try:
        said = wait_for(lambda: len(mails(smtp)) >= 2 and mails(smtp), timeout=30,
                        what="the news about the pager and the drop-in's alert")
        status = site.watchdogs("status")
    finally:
        proc.terminate()
        proc.wait(20)
    text = "\n".join(said)
    assert "alert channel pager is disabled" in text
    assert "GPU 3 fell off the bus" in text  # the checks and the mail channel keep working
    assert "s3cr3t" not in text
    # Nagios contract: the open CRITICALs (the drop-in's, the disabled channel's) make it 2.
    assert status.returncode == 2 and status.stdout.startswith("WATCHDOGS CRITICAL"), status.stderr
    assert "pager DISABLED" in status.stdout
    assert ("mode 0644" if how == "file 0644" else "$WD_TEST_PAGER_TOKEN") in status.stdout
    assert "Traceback" not in site.log()
