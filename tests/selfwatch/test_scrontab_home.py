"""The scrontab home on the dev cluster (issue 34 item 7): `watchdogs start --home scrontab`
installs one marked block in the user's scrontab (Slurm's cron, enabled by the dev
cluster's `ScronParameters=enable`), Slurm runs `watchdogs run --once --due --home scrontab`
at the next minute with the same config and state, the alert goes out once and the run is
recorded as a scrontab instance; `watchdogs stop` removes the block and Slurm drops the
queued cron job. Only where the release ships the scrontab client (24.11, 26.05; the host's
22.05 has none), and in CI on 24.11 alone: it costs about a minute (scrontab runs on minute
boundaries), and 26.05 runs the same client code. WATCHDOGS_SCRONTAB_RELEASES="24.11 26.05"
runs it on both."""
from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import sh, wait_for
from tests.scheduler.conftest import Site
from tests.state.test_state_design import failing_site, lines
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm


@pytest.fixture
def scron_site(site: Site, slurm_cluster: Path) -> Iterator[Site]:
    if shutil.which("scrontab") is None:
        pytest.skip("this Slurm release ships no scrontab client (22.05)")
    release = sh("sinfo", "-V").split()[-1]
    wanted = os.environ.get("WATCHDOGS_SCRONTAB_RELEASES", "24.11").split()
    if not any(release.startswith(w) for w in wanted):
        pytest.skip(f"the scrontab home is tested on {', '.join(wanted)} (CI budget), not {release}")
    yield site
    site.watchdogs("stop")
    if "slurm-watchdogs" in sh("scrontab", "-l", check=False):
        sh("scrontab", "-r", check=False)  # a failed test must not leave a cron job behind


def scron_modes(site: Site) -> list[str]:
    if not (site.state / "state.sqlite3").exists():
        return []
    try:
        rows = StateStore(site.state).connection().execute("SELECT mode FROM sched_instances").fetchall()
    except sqlite3.Error:  # not made yet by the first run
        return []
    return [str(r[0]) for r in rows]


@pytest.mark.timeout(150)
def test_scrontab_home_runs_the_checks_with_the_same_state_and_stop_removes_it(scron_site: Site) -> None:
    site = scron_site
    failing_site(site)
    started = site.watchdogs("start", "--home", "scrontab")
    assert started.returncode == 0, started.stderr
    assert "installed the scrontab home: every minute" in started.stdout, started.stdout
    listed = sh("scrontab", "-l")
    assert "# >>> slurm-watchdogs (watchdogs start --home scrontab) >>>" in listed
    assert f"#SCRON --job-name={site.job_name}-scron" in listed
    # Slurm's cron runs at the next minute boundary: at most ~60 s plus the job's start.
    wait_for(lambda: "scrontab" in scron_modes(site) and lines(site), timeout=100,
             what="the first scrontab run")
    assert sum("CRITICAL cron.hourly/fire" in line for line in lines(site)) == 1, lines(site)
    stopped = site.watchdogs("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "removed the scrontab home" in stopped.stdout, stopped.stdout
    assert "slurm-watchdogs" not in sh("scrontab", "-l", check=False)
    wait_for(lambda: not sh("squeue", "--me", "-h", "-n", f"{site.job_name}-scron", "-o", "%i").strip(),
             timeout=30, what="the cron job to leave the queue")
