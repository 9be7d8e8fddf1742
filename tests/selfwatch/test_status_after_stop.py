"""`status` right after `watchdogs stop`: the cancelled instance may still be listed by Slurm
(COMPLETING) and not have recorded its end yet; the reader must learn that the chain is
stopping or stopped and that no run is coming, not "scheduler running". The real chain on
the dev cluster, run as the user."""
from __future__ import annotations

import pytest

from tests.helpers import wait_for
from tests.scheduler.conftest import Site
from tests.scheduler.test_chain import running
from tests.selfwatch.test_chain_commands import chain_site

pytestmark = pytest.mark.slurm
__all__ = ["chain_site"]  # the fixture, shared with the other chain commands' tests


def test_status_right_after_stop_says_the_chain_is_stopping_and_no_run_is_coming(chain_site: Site) -> None:
    site = chain_site
    assert site.watchdogs("start").returncode == 0
    first = wait_for(lambda: running(site.job_name), timeout=30, what="the first instance")
    log = site.state / "scheduler" / f"{site.job_name}-{first}.out"
    wait_for(lambda: log.exists() and "scheduling " in log.read_text(), timeout=30, what="it to run")
    stopped = site.watchdogs("stop")
    assert stopped.returncode == 0, stopped.stderr
    status = site.watchdogs("status")
    head = next(line for line in status.stdout.splitlines() if line.startswith("scheduler  "))
    assert "scheduler  running" not in status.stdout, status.stdout
    assert head.startswith(("scheduler  STOPPING", "scheduler  STOPPED")), status.stdout
    assert "no run is coming" in head and "`watchdogs start`" in head
    # The Nagios line too: the stop is its own finding now, worst first (issue 34), so it may
    # lead the line rather than follow the open alerts.
    assert "scheduler stopp" in status.stdout.splitlines()[0]
