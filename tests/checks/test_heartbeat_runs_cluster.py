"""A requeued job keeps its id, and a rank that does not start again leaves its last
heartbeat behind: the watchdog explains a run's end by that run's records only. Here a real
job finishes (its one rank writes `done`), beside an earlier run's rank-1 record that says
`stopping`: the alert says it completed, not that trainguard stopped it."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.checks.conftest import Jobs, tick, write_config
from tests.helpers import accounted, sh, wait_for
from trainguard.heartbeat import write_heartbeat
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm


def test_an_earlier_runs_stopping_record_does_not_explain_a_later_runs_completion(
        jobs: Jobs, store: StateStore, tmp_path: Path) -> None:
    beats, name = tmp_path / "run" / "heartbeat", f"wdruns-{os.getpid()}"
    beats.mkdir(parents=True)
    done = (f"{sys.executable} -c \"from trainguard.heartbeat import write_heartbeat; "
            f"write_heartbeat('{beats}', 0, 30, 'done')\"")
    job = jobs.submit("--hold", name=name, wrap=done)
    # The earlier run (as a requeue leaves it): rank 1 stopped at step 12, two minutes ago.
    write_heartbeat(beats, 1, 12, "stopping", now=time.time() - 120, job_id=job)
    sh("scontrol", "release", job)
    wait_for(lambda: accounted(job), timeout=90, what="accounting has the run's end")
    cfg = write_config(tmp_path, f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n'
                                 f'heartbeats = "{beats}"\n')
    result = tick(cfg, store)[0]["train"]
    assert f"{name} (job {job}) completed at step 30 on " in result.summary, result.summary
    assert "stopped by" not in result.summary
