"""A config that stops loading at night: the instance runs from the last good copy just
long enough to say "watchdogs cannot load its config" through the last good channels
(once per change), and RESOLVED once the file is fixed."""
from __future__ import annotations

import pytest

from tests.helpers import wait_for
from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site
from tests.selfwatch.conftest import mail_config, mails
from watchdogs.state import lastgood


def run_briefly(site: Site) -> None:
    """A healthy scheduler that has kept its last good copy, then stopped."""
    proc = site.popen("run")
    try:
        wait_for(lambda: "scheduling " in site.log(), timeout=30, what="the scheduler's loop")
        assert lastgood.path_in(site.state).exists()
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.timeout(90)
def test_broken_config_is_said_through_the_last_good_channels_once_then_resolved(
        site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp)
    run_briefly(site)
    assert mails(smtp) == []  # nothing to say while all is well
    good = site.config.read_text()
    site.config.write_text(good.replace('tick = "1s"', 'tick = "1s'))  # an unterminated string
    for _attempt in range(2):
        broken = site.watchdogs("run")
        assert broken.returncode == 2 and "Traceback" not in broken.stderr
        assert "watchdogs cannot load its config (1 problem)" in broken.stderr
    said = wait_for(lambda: mails(smtp), timeout=10, what="the mail about the config")
    assert len(said) == 1  # the second instance had nothing new to say
    assert "watchdogs cannot load its config" in said[0]
    assert f"{site.config}" in said[0] and "valid TOML" in said[0]
    site.config.write_text(good)
    run_briefly(site)
    fixed = wait_for(lambda: mails(smtp)[1:], timeout=10, what="the RESOLVED mail")
    assert "RESOLVED" in fixed[0] and "watchdogs loads its config again" in fixed[0]


@pytest.mark.timeout(60)
def test_without_a_last_good_copy_the_log_says_nobody_could_be_told(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp)
    site.config.write_text(site.config.read_text() + "\n[[notify\n")
    broken = site.watchdogs("run")
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert "no last good copy of the config" in broken.stderr
    assert mails(smtp) == []


@pytest.mark.timeout(60)
def test_config_broken_under_a_running_scheduler_is_said_at_once(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp)
    proc = site.popen("run")
    try:
        wait_for(lambda: "scheduling " in site.log(), timeout=30, what="the scheduler's loop")
        good = site.config.read_text()
        site.config.write_text(good + "\n[[notify]\n")  # someone's edit at night
        said = wait_for(lambda: mails(smtp), timeout=15, what="the mail about the edit")
        assert "watchdogs cannot load its config" in said[0]
        assert "the running instance keeps the config it loaded" in said[0]
        site.config.write_text(good)
        fixed = wait_for(lambda: mails(smtp)[1:], timeout=15, what="the RESOLVED mail")
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(20)
    assert "RESOLVED" in fixed[0] and "watchdogs loads its config again" in fixed[0]
