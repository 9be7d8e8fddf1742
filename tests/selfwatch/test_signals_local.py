"""The last word of a foreground `watchdogs run` (no Slurm): a signal nobody expected (an
administrator's kill -USR2 or -HUP) ends it with one CRITICAL on its channels, a /fail on the
dead man's switch, and an end record naming the signal; SIGTERM there is its own person's
or service manager's stop and sends nothing. Real processes, signals, SMTP and HTTP."""
from __future__ import annotations

import os
import signal

import pytest

from tests.helpers import wait_for
from tests.notifiers.fakes import FakeHTTP, SmtpServer
from tests.scheduler.conftest import Site, script
from tests.selfwatch.conftest import mail_config, mails, ping_id
from watchdogs.scheduler.records import Records
from watchdogs.state.store import StateStore


def ended_reason(site: Site) -> str | None:
    latest = Records(StateStore(site.state)).latest_instance()
    return latest["reason"] if latest and latest["ended"] else None


def started(site: Site) -> bool:
    return "scheduling " in site.log()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGUSR2, signal.SIGHUP])
def test_an_unexpected_signal_gives_one_critical_a_fail_ping_and_an_end_record(
        site: Site, smtp: SmtpServer, hc: FakeHTTP, signum: signal.Signals) -> None:
    check = ping_id()
    mail_config(site, smtp, f'heartbeat_url = "{hc.url}/ping/{check}"\nheartbeat_every = "1h"')
    site.dropin("tick", script("echo 'tick OK'"))
    proc = site.popen("run")
    try:
        wait_for(lambda: started(site), timeout=30, what="the scheduler to start")
        os.kill(proc.pid, signum)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    name = signum.name
    said = wait_for(lambda: [m for m in mails(smtp) if "CRITICAL" in m], timeout=10, what="the last word")
    assert len(said) == 1, said
    assert f"ended by an unexpected signal {name}" in said[0] and "watchdogs:chain" in said[0], said[0]
    assert f"watchdogs --config {site.config} run" in said[0]  # the one command that restarts it
    fail = [s.body.decode() for s in list(hc.seen) if s.path == f"/ping/{check}/fail"]
    assert len(fail) == 1 and name in fail[0], fail
    assert ended_reason(site) == f"ended by an unexpected signal {name}"


@pytest.mark.timeout(60)
def test_sigterm_on_a_foreground_run_is_a_quiet_stop(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp)
    site.dropin("tick", script("echo 'tick OK'"))
    proc = site.popen("run")
    try:
        wait_for(lambda: started(site), timeout=30, what="the scheduler to start")
        proc.terminate()
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert ended_reason(site) == "terminated (SIGTERM)"
    assert "last word" not in site.log() and mails(smtp) == []
