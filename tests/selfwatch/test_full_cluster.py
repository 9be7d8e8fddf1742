"""A really full cluster (issue 34's "Done when"), on the dev cluster, as the ordinary user:
another user (`wdpeer`) takes every CPU of the chain's partition with `sleep` jobs and has
more queued, ranked above everything by an administrator (as multifactor priority ranks a
busy group's jobs). The watchdog's successor cannot start: it is told before watching stops
(a WARNING with the pending reason), the time limit comes (its USR1, emulated: the real one
is up to a minute coarse), the instance hands over to nobody and the dead man's switch gets
/fail; while blind `watchdogs status` exits CRITICAL and says why; once the other user frees
one CPU the successor starts. One chain, one node."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import job_state, privileged, sh, wait_for
from tests.notifiers.fakes import FakeHTTP, SmtpServer
from tests.scheduler.conftest import Site, script
from tests.scheduler.test_chain import chain_job, records, running, settled
from tests.selfwatch.conftest import mail_config, mails, ping_id
from tests.selfwatch.test_chain_commands import chain_site

pytestmark = pytest.mark.slurm
__all__ = ["chain_site"]
PARTITION, NODE, CPUS = "cpu", "node3", 4
"""The dev cluster's one-node partition (slurm/dev-cluster): filling 4 CPUs is cheap."""
TOP = "4294967000"
"""An administrator's priority for the other user's jobs: above anything the chain gets (on
22.05's priority/basic a job starts at 4294901760 and counts down; 4000000000 ranked below the
chain's next there, which then took the freed CPU: no gap, but not the case under test)."""


def peer_jobs(state: str = "") -> list[str]:
    """The other user's jobs in that state; without one, those still live (squeue's default)."""
    states = [f"--states={state}"] if state else []
    out = sh("squeue", "--noheader", "--user=wdpeer", *states, "--format=%i", check=False)
    return out.split()


@pytest.fixture
def crowd(slurm_cluster: Path) -> Iterator[None]:
    """The other user's fillers, all gone afterwards whatever happened."""
    wait_for(lambda: not sh("squeue", "--noheader", f"--nodelist={NODE}", "--format=%i", check=False).strip(),
             timeout=60, what=f"{NODE} to run nothing else")
    yield
    privileged("peer-jobs", str(slurm_cluster.parent), "cancel")
    wait_for(lambda: not peer_jobs(), timeout=30, what="the other user's jobs to end")


@pytest.mark.timeout(150)
def test_on_a_full_cluster_the_watchdog_warns_before_going_blind_and_status_says_blind(
        chain_site: Site, crowd: None, smtp: SmtpServer, hc: FakeHTTP, slurm_cluster: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    site, check = chain_site, ping_id()
    monkeypatch.setenv("SBATCH_PARTITION", PARTITION)  # the chain's successors inherit it
    # The whole life is inside the warning window: the WARNING is due once the next is eligible.
    mail_config(site, smtp, f'heartbeat_url = "{hc.url}/ping/{check}"\nheartbeat_every = "1h"\n'
                            'handover_lead = "6h"\nhandover_warn = "6h"\nheartbeat_stale = "5s"')
    site.dropin("tick", script("echo 'tick OK'"))
    assert site.watchdogs("start").returncode == 0
    first = wait_for(lambda: settled(site), timeout=40, what="the first instance with its successors")
    nxt = chain_job(site, "next", first)
    assert nxt is not None

    # Every other CPU of the node to the other user, and two more of theirs queued above ours.
    privileged("peer-jobs", str(slurm_cluster.parent), "submit", PARTITION, str(CPUS - 1 + 2), TOP)
    wait_for(lambda: len(peer_jobs("RUNNING")) == CPUS - 1, timeout=30,
             what="the other user's fillers to run")
    sh("scontrol", "update", f"JobId={nxt}", "StartTime=now")  # the next is eligible: its lead has come
    warned = wait_for(lambda: [m for m in mails(smtp) if "WARNING: watchdogs:chain" in m], timeout=45,
                      what="the goes-blind warning (the keeper looks every 30 s in the window)")
    text = " ".join(warned[0].split())
    assert "watchdogs goes blind at " in text and re.search(
        rf"successor job {nxt} PENDING \((Priority|Resources)\)", text), text
    assert running(site.job_name) == first  # told while it still watches

    sh("scancel", "--batch", "--signal=USR1", first)  # its time limit
    wait_for(lambda: job_state(first) == "COMPLETED", timeout=30, what="the instance to end")
    ended = time.time()
    # Its CPU went to the other user's job ranked above ours: nothing of the chain runs.
    wait_for(lambda: len(peer_jobs("RUNNING")) == CPUS, timeout=30, what="the other user to take the CPU")
    assert running(site.job_name) is None
    (old,) = [lf for lf in records(site).lives_before(10**9) if lf.job_id == first]
    assert old.reason is not None and old.reason.startswith("handover (time limit near): successor job "), old
    wait_for(lambda: [s for s in list(hc.seen) if s.path == f"/ping/{check}/fail"], timeout=10,
             what="a /fail ping")

    def blind() -> str:
        status = site.watchdogs("status")
        return status.stdout if status.returncode == 2 else ""
    said = wait_for(blind, timeout=30, what="status CRITICAL")
    head = said.splitlines()[0]
    assert head.startswith("WATCHDOGS CRITICAL: scheduler BLIND since "), said
    assert re.search(r"PENDING \((Priority|Resources)\)", head), said

    # A gap worth a notice: longer than two ticks and 5 s (a normal handover's second is not).
    wait_for(lambda: time.time() - ended > 8, timeout=10, what="a gap longer than two ticks and 5 s")
    # The other user frees one CPU (their queued jobs gone first, or they would take it).
    queued = peer_jobs("PENDING")
    privileged("peer-jobs", str(slurm_cluster.parent), "cancel", *queued)
    wait_for(lambda: not peer_jobs("PENDING"), timeout=20, what="the other user's queued jobs to go")
    privileged("peer-jobs", str(slurm_cluster.parent), "cancel", peer_jobs("RUNNING")[0])
    wait_for(lambda: running(site.job_name), timeout=30, what="a successor to start in the freed CPU")
    # Afterwards, one notice with the gap's length, and the warning resolved (one message).
    told = wait_for(lambda: [m for m in mails(smtp) if "not watching from " in m], timeout=60,
                    what="the gap notice")
    assert len(told) == 1, told
    assert re.search(r"not watching from \S+ to \S+ \(\d+ (s|min)", " ".join(told[0].split())), told[0]
    assert "RESOLVED" in told[0] or "resolved" in told[0].splitlines()[0], told[0]
