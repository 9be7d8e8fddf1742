"""The real local cluster: a job goes through squeue to completion; a drained node shows."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import admin_scontrol, sh, wait_for

pytestmark = pytest.mark.slurm


def test_a_submitted_job_is_queued_runs_and_completes(slurm_cluster: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    job_id = sh("sbatch", "--parsable", "-J", "smoke", "-o", str(out), "--wrap",
                "sleep 3; echo done-$SLURM_JOB_ID").strip()
    seen = wait_for(lambda: job_id in sh("squeue", "-h", "-o", "%i", "-j", job_id))
    assert seen
    state = wait_for(lambda: "COMPLETED" in (s := sh("scontrol", "show", "job", job_id)) and s)
    assert "ExitCode=0:0" in state
    assert wait_for(lambda: out.exists() and out.read_text().strip() == f"done-{job_id}")


def test_a_drained_node_shows_in_sinfo_with_its_reason(slurm_cluster: Path) -> None:
    admin_scontrol("update", "NodeName=node2", "State=DRAIN", "Reason=bad gpu")
    try:
        line = wait_for(lambda: sh("sinfo", "-h", "-R", "-o", "%N|%E|%T").strip())
        assert "node2|bad gpu|drained" in line
    finally:
        admin_scontrol("update", "NodeName=node2", "State=RESUME")
    wait_for(lambda: "node2" not in sh("sinfo", "-h", "-R", "-o", "%N"))
