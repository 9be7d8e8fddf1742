"""Told before going blind, on the real dev cluster as the user: a running instance whose
next has not started within `handover_warn` of the end sends one WARNING saying when
watching stops, the successor's state and what would help; when its time limit comes
(USR1, emulated: the real one is up to a minute coarse) with no successor running, it ends
saying so and the dead man's switch gets /fail; the next, once it starts, takes over and
resolves the warning."""
from __future__ import annotations

import pytest

from tests.helpers import job_state, sh, wait_for
from tests.notifiers.fakes import FakeHTTP, SmtpServer
from tests.scheduler.conftest import Site, script
from tests.scheduler.test_chain import chain_job, records, running, settled
from tests.selfwatch.conftest import mail_config, mails, ping_id
from tests.selfwatch.test_chain_commands import chain_site

pytestmark = pytest.mark.slurm
__all__ = ["chain_site"]


@pytest.mark.timeout(120)
def test_a_successor_that_cannot_start_in_time_is_warned_then_failed_then_resolved(
        chain_site: Site, smtp: SmtpServer, hc: FakeHTTP) -> None:
    site, check = chain_site, ping_id()
    # The whole life is inside the warning window: the WARNING is due once the next is eligible.
    mail_config(site, smtp, f'heartbeat_url = "{hc.url}/ping/{check}"\nheartbeat_every = "1h"\n'
                            'handover_lead = "6h"\nhandover_warn = "6h"')
    site.dropin("tick", script("echo 'tick OK'"))
    assert site.watchdogs("start").returncode == 0
    first = wait_for(lambda: settled(site), timeout=40, what="the first instance with its successors")
    nxt, rescue = chain_job(site, "next", first), chain_job(site, "rescue", first)
    assert nxt and rescue
    sh("scontrol", "hold", nxt, rescue)  # a full cluster: neither can start...
    sh("scontrol", "update", f"JobId={nxt}", "StartTime=now")  # ...though the next is eligible now
    warned = wait_for(lambda: [m for m in mails(smtp) if "WARNING: watchdogs:chain" in m], timeout=45,
                      what="the goes-blind warning (the keeper looks every 30 s in the window)")
    assert len(warned) == 1
    text = " ".join(warned[0].split())
    assert "watchdogs goes blind at " in text and f"successor job {nxt} PENDING (JobHeldUser)" in text, text
    assert "would help: a QOS that ranks higher" in text and "would help: a shorter time limit" in text
    assert "would help: partition " in text  # the dev cluster has idle CPUs elsewhere now

    sh("scancel", "--batch", "--signal=USR1", first)  # the time limit's signal
    wait_for(lambda: job_state(first) == "COMPLETED", timeout=30, what="the instance to end")
    (old,) = [lf for lf in records(site).lives_before(10**9) if lf.job_id == first]
    assert old.reason is not None and old.reason.startswith(
        f"handover (time limit near): successor job {nxt} PENDING ("), old.reason
    fail = wait_for(lambda: [s.body.decode() for s in list(hc.seen) if s.path == f"/ping/{check}/fail"],
                    timeout=10, what="a /fail ping")
    assert fail[0].startswith("watchdogs goes blind: handover (time limit near)"), fail

    sh("scontrol", "release", nxt)  # a CPU frees
    wait_for(lambda: running(site.job_name) == nxt, timeout=30, what="the next to start")
    wait_for(lambda: [m for m in mails(smtp) if "RESOLVED: watchdogs:chain" in m], timeout=30,
             what="the warning resolved")
    # Once for this successor (the new instance, as deep in its own window, warns of its own next).
    assert len([m for m in mails(smtp) if "WARNING: watchdogs:chain" in m and f"job {nxt} PENDING" in m]) == 1
