"""A preemption is told as one (issue 25): on the dev cluster a job in the `low` partition
is preempted by a job in `high` (PreemptMode=REQUEUE, GraceTime=20) and Slurm requeues it.
It then waits with reason BeginTime like any requeue; only accounting records the run that
ended as PREEMPTED. Real scheduler runs (`watchdogs run --once`, as the user) record it; the
status page and the `requeued` notice delivered to a logfile channel say "preempted".
Run on the host's Slurm and on 24.11 (a second dev cluster)."""
from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.report.conftest import look
from tests.scheduler.conftest import Site
from tests.trainguard.support import Cluster

pytestmark = pytest.mark.slurm


@pytest.mark.timeout(240)
def test_a_job_preempted_and_requeued_is_preempted_on_the_page_and_in_the_notice(
        site: Site, cluster: Cluster, tmp_path: Path) -> None:
    name = f"preempt-{uuid.uuid4().hex[:8]}"  # accounting keeps earlier runs: a name of its own
    alerts = tmp_path / "alerts.log"
    site.write_config(f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n'
                      'notices = ["requeued"]\n'
                      f'[[notify]]\nname = "log"\ntype = "logfile"\npath = "{alerts}"\n')
    low = cluster.sbatch(None, sbatch_args=("-p", "low", "-n", "4", "--requeue", "-J", name,
                                            "-o", "/dev/null", "--wrap", "sleep 600"))
    cluster.wait_state(low, ("RUNNING",), timeout=60)
    look(site)                                      # running
    cluster.sbatch(None, sbatch_args=("-p", "high", "-n", "4", "-o", "/dev/null", "--wrap", "sleep 1"))
    wait_for(lambda: cluster.field(low, "Restarts") == "1" and cluster.state(low) == "PENDING",
             90, 0.25, f"job {low} preempted, requeued and pending")
    assert cluster.field(low, "Reason") != "Preemption"  # what squeue says is no help
    look(site)                                      # pending again after running
    page = tmp_path / "report.html"
    done = site.watchdogs("report", "--out", str(page))
    assert done.returncode == 0, done.stderr

    dom = page.read_text()
    rows = re.findall(r'<tr><td class="when">[^<]+</td><td><span class="status"[^>]*>(\w+)</span></td>'
                      r'<td data-label="Job">(\d+)</td>'
                      r'<td class="summary">([^<]*)</td></tr>', dom)
    assert ("preempted", low, f"preempted (job {low})") in rows, rows
    assert not [r for r in rows if r[0] == "requeued"], rows
    told = alerts.read_text()
    assert f"{name} (job {low}) was preempted and requeued" in told, told
