"""`watchdogs start` confirms that the first instance lived, on the real local Slurm cluster,
as the ordinary user: it says where the instance runs and when it ticked (exit 0); a job
that dies at its first breath (a venv the compute node lacks) is named with its log's last
line and the fix (exit 2); a job that cannot start (the cluster is full) is "still pending"
with Slurm's reason (exit 1). And the ordinary user's venv made with the host's
/usr/bin/python3 (the README in a login shell) runs the chain on every release, the roots of
24.11 and 26.05 included. Each start reuses the chain tests' site and costs seconds."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import job_state, sh, wait_for
from tests.scheduler.conftest import Site
from tests.scheduler.test_chain import live_jobs
from tests.selfwatch.test_chain_commands import chain_site

pytestmark = pytest.mark.slurm
__all__ = ["chain_site"]  # the fixture, shared with the other chain commands' tests
SYSTEM_PYTHON = Path("/usr/bin/python3")


def start(site: Site, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(site.config), "start", *args],
                          capture_output=True, text=True, timeout=60, env=env or site.env(), cwd=site.root)


@pytest.mark.timeout(60)
def test_start_says_where_the_first_instance_runs_and_when_it_ticked(chain_site: Site) -> None:
    site = chain_site
    started = start(site, "--wait", "40")
    assert started.returncode == 0, started.stdout + started.stderr
    job = re.search(r"as job (\d+)", started.stdout)
    assert job is not None, started.stdout
    assert re.search(rf"instance \d+ \(job {job[1]}\) is running on node\d.* and ticked at "
                     r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", started.stdout), started.stdout


@pytest.mark.timeout(60)
def test_a_first_instance_whose_python_the_node_lacks_fails_start_with_its_log_line_and_the_fix(
        chain_site: Site) -> None:
    site = chain_site
    missing = site.root / "sw" / ".venv" / "bin" / "python"  # the venv was never made here
    started = start(site, "--wait", "40", env={**site.env(), "WATCHDOGS_PYTHON": str(missing)})
    assert started.returncode == 2, started.stdout + started.stderr
    assert "failed at start: it ended before its first tick (state FAILED, exit code 127:0)" in started.stdout
    assert re.search(rf"last line: .*slurm_script: line \d+: {re.escape(str(missing))}: No such file or "
                     "directory", started.stdout), started.stdout
    assert (f"fix: the compute node has no {missing}: install the venv on a path the compute nodes share"
            in started.stdout)
    assert "Traceback" not in started.stderr
    assert live_jobs(site.job_name) == []  # it died before it could queue a successor


@pytest.mark.timeout(90)
def test_a_start_on_a_full_cluster_says_still_pending_with_slurms_reason(chain_site: Site) -> None:
    site = chain_site
    # The chain's partition (debug: node1 and node2) taken whole by another job of the user.
    filler = sh("sbatch", "--parsable", "--exclusive", "--nodes=2", "--partition=debug", "--time=2",
                f"--job-name={site.job_name}-filler", f"--output={site.root}/filler-%j.out",
                "--wrap", "sleep 120").strip()
    try:
        wait_for(lambda: job_state(filler) == "RUNNING", timeout=30, what="the job that fills the partition")
        started = start(site, "--wait", "3")
        assert started.returncode == 1, started.stdout + started.stderr
        assert re.search(r"job \d+ is still pending \((Resources|Priority)\)", started.stdout), started.stdout
        assert "what helps: the cluster is busy" in started.stdout and "SBATCH_PARTITION" in started.stdout
    finally:
        sh("scancel", filler, check=False)


@pytest.mark.timeout(90)
def test_a_venv_of_the_hosts_system_python_runs_the_chain_on_every_release(chain_site: Site) -> None:
    """The user followed the README in a login shell: their venv's python is a link to the
    host's /usr/bin/python3, which the 24.11 and 26.05 roots do not have of their own."""
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"{SYSTEM_PYTHON} is not installed here")
    site = chain_site
    venv = site.root / "sw" / ".venv"
    made = subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)], capture_output=True,
                          text=True, timeout=60)
    if made.returncode != 0:
        pytest.skip(f"{SYSTEM_PYTHON} -m venv fails here: {made.stderr.strip()[-300:]}")
    assert os.readlink(venv / "bin" / "python3") == str(SYSTEM_PYTHON)
    # slurm-watchdogs in it without pip (which would cost a minute and the index): this test
    # venv's packages, added as a site folder. What is under test is the interpreter and
    # standard library the job finds on the compute node.
    packages = sysconfig.get_path("purelib")
    site_dir = next((venv / "lib").glob("python3.*")) / "site-packages"
    (site_dir / "watchdogs-checkout.pth").write_text(f"import site; site.addsitedir({packages!r})\n")
    python = venv / "bin" / "python"
    started = start(site, "--wait", "40", env={**site.env(), "WATCHDOGS_PYTHON": str(python)})
    assert started.returncode == 0, started.stdout + started.stderr
    assert re.search(r"is running on node\d.* and ticked at", started.stdout), started.stdout
