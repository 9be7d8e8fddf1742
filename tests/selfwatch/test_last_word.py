"""The chain's last word on the real dev cluster, as the user: `scancel` of the running
instance alone gives one CRITICAL within KillWait naming who cancelled it, the queued
successor and the restart command; the successor takes over and resolves it. `scancel` of
the whole chain gives one CRITICAL saying no successor is queued. `watchdogs stop` says
nothing. One chain, one SMTP server, one dead man's switch for all three phases."""
from __future__ import annotations

import re
import time

import pytest

from tests.helpers import sh, wait_for
from tests.notifiers.fakes import FakeHTTP, SmtpServer
from tests.scheduler.conftest import Site, script
from tests.scheduler.test_chain import live_jobs, settled
from tests.selfwatch.conftest import mail_config, mails, ping_id
from tests.selfwatch.test_chain_commands import chain_site

pytestmark = pytest.mark.slurm
__all__ = ["chain_site"]
KILLWAIT_S = 5.0
"""The dev cluster's KillWait: SIGKILL follows SIGTERM after this."""


def criticals(smtp: SmtpServer) -> list[str]:
    return [m for m in mails(smtp) if "CRITICAL" in m.split("\n", 1)[0]]


def chain_said(smtp: SmtpServer) -> list[str]:
    return [m for m in criticals(smtp) if "watchdogs:chain" in m]


def resolved(smtp: SmtpServer) -> list[str]:
    return [m for m in mails(smtp) if "RESOLVED: watchdogs:chain" in m]


def logs(site: Site) -> str:
    return "\n".join(p.read_text() for p in (site.state / "scheduler").glob("*.out"))


def fails(hc: FakeHTTP, check: str) -> list[str]:
    return [s.body.decode() for s in list(hc.seen) if s.path == f"/ping/{check}/fail"]


@pytest.mark.timeout(150)
def test_scancel_of_the_instance_alone_then_with_its_successors_gives_one_critical_each_within_killwait(
        chain_site: Site, smtp: SmtpServer, hc: FakeHTTP) -> None:
    site, check = chain_site, ping_id()
    mail_config(site, smtp, f'heartbeat_url = "{hc.url}/ping/{check}"\nheartbeat_every = "1h"')
    site.dropin("tick", script("echo 'tick OK'"))
    marker = site.root / "drained"
    site.dropin("drain", script(f"if [ -e {marker} ]; then echo 'node7 drained'; exit 2; fi\n"
                                "echo 'no drain'"))
    assert site.watchdogs("start").returncode == 0
    first = wait_for(lambda: settled(site), timeout=40, what="the first instance with its successors")
    restart = f"watchdogs --config {site.config} start"

    sh("scancel", first)  # a) the instance alone
    cancelled = time.monotonic()
    (said,) = wait_for(lambda: chain_said(smtp), timeout=KILLWAIT_S + 2, what="the last word")
    assert time.monotonic() - cancelled <= KILLWAIT_S + 2
    assert f"(job {first}) was cancelled by wdtest (uid " in said, said
    assert "is queued (PENDING" in said and "released to start now" in said and restart in said, said
    assert len(fails(hc, check)) == 1
    second = wait_for(lambda: settled(site) not in (None, first) and settled(site), timeout=40,
                      what="the successor to take over")
    wait_for(lambda: resolved(smtp), timeout=20, what="the successor to resolve it")

    sh("scancel", "--me", f"--name={site.job_name}")  # b) the whole chain at once
    both = wait_for(lambda: chain_said(smtp)[1:], timeout=KILLWAIT_S + 2, what="the second last word")
    # Who ended it comes from accounting; under load slurmdbd may not have the cancel yet
    # within the grace, and the words say what the instance itself saw (its SIGTERM).
    assert len(both) == 1 and re.search(
        rf"\(job {second}\) was (cancelled by wdtest|terminated \(SIGTERM\))", both[0]), both
    assert "no successor is queued: nothing watches from now on; restart: " + restart in both[0]
    wait_for(lambda: not live_jobs(site.job_name), timeout=30, what="the chain to be gone")
    marker.touch()  # c) something happens while nothing watches...
    blind = time.time()
    wait_for(lambda: time.time() - blind > 8, timeout=10, what="a gap longer than two ticks and 5 s")
    assert site.watchdogs("start").returncode == 0  # ...and the next instance tells the gap
    wait_for(lambda: len(resolved(smtp)) == 2, timeout=40, what="the restarted chain to resolve it")
    notice = [m for m in mails(smtp) if "not watching from " in m]
    assert len(notice) == 1 and " s): the previous instance (job " in notice[0], notice
    assert "ended: terminated (SIGTERM)" in notice[0]
    late = wait_for(lambda: [m for m in criticals(smtp) if "cron.hourly/drain" in m], timeout=20,
                    what="the drain's alert")
    assert "seen late: nothing watched from " in late[0], late[0]
    sent = len(mails(smtp))
    assert site.watchdogs("stop").returncode == 0
    wait_for(lambda: not live_jobs(site.job_name), timeout=30, what="the chain to end")
    wait_for(lambda: "no last word" in logs(site), timeout=10, what="the stopped instance's log")
    assert len(mails(smtp)) == sent, mails(smtp)[sent:]
    assert len(chain_said(smtp)) == 2 and len(fails(hc, check)) == 2
