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
TOP = "4000000000"
"""An administrator's priority for the other user's jobs: above anything the chain gets."""


def peer_jobs(state: str = "") -> list[str]:
    """The other user's jobs in that state; without one, those still live (squeue's default)."""
    states = [f"--states={state}"] if state else []
    out = sh("squeue", "--noheader", "--user=wdpeer", *states, "--format=%i", check=False)
    return out.split()


@pytest.fixture
def crowd(slurm_cluster: Path) -> Iterator[None]:
    """The other user's fillers, all gone afterwards whatever happened."""
    if sh("sinfo", "-V").split()[-1].startswith("22.05"):
        # Not yet understood, so not hidden: on 22.05 the freed CPU did not go to the other
        # user's top-priority job within 30 s (the successor's fate there is unverified).
        pytest.skip("full-cluster scenario verified on 24.11 and 26.05 only; 22.05 open (w34full report)")
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

    # The other user frees one CPU (their queued jobs gone first, or they would take it).
    queued = peer_jobs("PENDING")
    privileged("peer-jobs", str(slurm_cluster.parent), "cancel", *queued)
    wait_for(lambda: not peer_jobs("PENDING"), timeout=20, what="the other user's queued jobs to go")
    privileged("peer-jobs", str(slurm_cluster.parent), "cancel", peer_jobs("RUNNING")[0])
    wait_for(lambda: running(site.job_name), timeout=30, what="a successor to start in the freed CPU")
    # Not asserted yet: the gap notice ("not watching from ... to ... (N s)") and the RESOLVED of
    # the warning. On 24.11 neither reached the mail within 30 s of the successor's start in the
    # first run of this scenario (undiagnosed: see the w34full report); test_last_word.py covers
    # the notice after a scancel gap.
