"""Every path back into the queue goes through trainguard.recovery.requeue (issue 19's leftovers,
issue 22 item 2): a preemption requeues the job exactly once whatever requeues it (the
requeue template, the torchrun template, the array's last task, `self_requeue` without a
template), on 22.05 (where Slurm does not) as on 24.11+ (where Slurm does); and an array
chain's next task gets the run's suspect nodes as its ExcNodeList."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import sh, wait_for
from tests.trainguard.support import (
    ARRAY_SCRIPT,
    PYTHON,
    REQUEUE_SCRIPT,
    TORCHRUN_SCRIPT,
    TRAIN_TINY,
    Cluster,
    wait_for_step,
)
from tests.trainguard.test_slurm_switches import array_tasks

pytestmark = pytest.mark.slurm
TRAIN = ("--steps", "400", "--step-sleep", "0.05", "--guard", "endtime_every=2")


def submit(cluster: Cluster, tmp_path: Path, path: str) -> str:
    """A training on `low` (node3, all 4 CPUs: a `high` job preempts it whole)."""
    steps, out, run = tmp_path / "steps", str(tmp_path / "out.log"), str(tmp_path / "run")
    args = (*TRAIN, "--step-log", str(steps))
    low = ("-p", "low", "--time=10", "-o", out)
    if path == "template":
        return cluster.sbatch(REQUEUE_SCRIPT, *args, sbatch_args=(*low, "-n", "4"), env={"RUN_DIR": run})
    if path == "torchrun":
        return cluster.sbatch(TORCHRUN_SCRIPT, *args, sbatch_args=(*low, "-N", "1", "-c", "4"),
                              env={"RUN_DIR": run})
    if path == "array":
        array = cluster.sbatch(ARRAY_SCRIPT, *args, sbatch_args=(*low, "-n", "4", "--array=0"),
                               env={"RUN_DIR": run})
        return f"{array}_0"
    wrap = (f"exec python3 {TRAIN_TINY} {' '.join(args)} --guard checkpoint_dir={tmp_path / 'ckpt'} "
            f"--guard self_requeue=true")
    return cluster.sbatch(None, sbatch_args=(*low, "-n", "4", "--requeue", "--open-mode=append",
                                             "--wrap", wrap))


def release() -> tuple[int, int]:
    found = re.search(r"(\d+)\.(\d+)", sh("scontrol", "-V"))
    assert found
    return int(found.group(1)), int(found.group(2))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", ["template", "torchrun", "array", "self_requeue"])
def test_a_preemption_requeues_the_job_exactly_once_on_every_path(
        cluster: Cluster, tmp_path: Path, path: str) -> None:
    job = submit(cluster, tmp_path, path)
    wait_for_step(tmp_path / "steps", 20, timeout=120)
    high = cluster.sbatch(None, sbatch_args=("-p", "high", "-n", "4", "-o", "/dev/null", "--wrap", "sleep 2"))
    cluster.wait_state(high, ("COMPLETED",), timeout=90)
    cluster.release_when_requeued(job, 1, 90)
    cluster.wait_state(job, ("COMPLETED",), timeout=150)
    log = (tmp_path / "out.log").read_text()
    assert "final step 399" in log, log[-3000:]
    # Exactly one requeue: a second one (ours on top of Slurm's own) would requeue the
    # finished run again and show Restarts=2 or a pending job here.
    wait_for(lambda: cluster.state(job) == "COMPLETED" and cluster.field(job, "Restarts") == "1", 15,
             0.5, f"job {job} completed after one requeue")
    if release() >= (24, 11):
        assert "preempted: Slurm requeues the job itself" in log, log[-3000:]
    else:
        assert "requeued" in log and "preempted: Slurm requeues" not in log, log[-3000:]


def note(run: Path, job: str, node: str) -> None:
    subprocess.run([PYTHON, "-m", "trainguard.recovery", "note", "--run-dir", str(run), "--job", job,
                    "--cause", "hang", "--nodes", node], check=True, capture_output=True, text=True)


@pytest.mark.timeout(180)
def test_an_array_chains_next_task_excludes_the_runs_suspect_node(cluster: Cluster, tmp_path: Path) -> None:
    run, steps = tmp_path / "run", tmp_path / "steps"
    array = cluster.sbatch(ARRAY_SCRIPT, "--steps", "3000", "--step-sleep", "0.02", "--step-log", str(steps),
                           sbatch_args=("-p", "spare", "--array=1-2%1", "-o", str(tmp_path / "out-%a.log")),
                           env={"RUN_DIR": str(run)})
    wait_for_step(steps, 20, timeout=60)
    first = array_tasks(array)[1]["NodeList"]
    note(run, f"{array}_1", first)            # as a hang on that node would have recorded it
    sh("scancel", "--batch", "--signal=USR1", f"{array}_1", check=False)
    wait_for(lambda: (t := array_tasks(array).get(2)) and t["JobState"] == "RUNNING", 90, 0.5,
             "task 2 running")
    second = array_tasks(array)[2]
    log = (tmp_path / "out-1.log").read_text()
    assert f"excluding {first}" in log, log[-3000:]
    assert second["ExcNodeList"] == first and second["NodeList"] != first, second
