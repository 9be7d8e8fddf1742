"""train-array.slurm on the real cluster: the kill switch ends a running task and the
queued tasks of the chain burn through at start-up; a chain resumes task after task."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.helpers import sh, wait_for
from tests.trainguard.support import ARRAY_SCRIPT, TERMINAL, Cluster, wait_for_step

pytestmark = pytest.mark.slurm


def array_tasks(array_id: str) -> dict[int, dict[str, str]]:
    """Task id -> fields of every task of an array (one `scontrol show job -o` line each)."""
    tasks = {}
    for line in sh("scontrol", "show", "job", "-o", array_id, check=False).splitlines():
        fields = dict(re.findall(r"(?:^|\s)(\w+)=(\S*)", line))
        task = fields.get("ArrayTaskId", "")
        if task.isdigit():
            tasks[int(task)] = fields
    return tasks


@pytest.mark.timeout(150)
def test_a_chain_goes_on_in_the_next_task_and_the_kill_switch_burns_the_rest_through(
        cluster: Cluster, tmp_path: Path) -> None:
    run, steps = tmp_path / "run", tmp_path / "steps"
    array = cluster.sbatch(ARRAY_SCRIPT, "--steps", "5000", "--step-sleep", "0.02",
                           "--step-log", str(steps),
                           sbatch_args=("--array=1-5%1", "-o", str(tmp_path / "out-%a.log")),
                           env={"RUN_DIR": str(run)})
    wait_for_step(steps, 20, timeout=60)
    # Task 1's warning. scancel 22.05 delivers it but then exits 229 ("Invalid job id") for a
    # task of a throttled array, so its exit code is ignored: the log below shows delivery.
    sh("scancel", "--batch", "--signal=USR1", f"{array}_1", check=False)
    stopped_at = wait_for(lambda: re.findall(r"stopping after step (\d+)",
                                             (tmp_path / "out-1.log").read_text()), 30)
    wait_for_step(steps, int(stopped_at[0]) + 20, timeout=60)                  # task 2 trains on
    (run / "KILL").touch()
    touched = time.monotonic()
    wait_for(lambda: len(t := array_tasks(array)) == 5
             and all(f["JobState"] in TERMINAL for f in t.values()), 60, 0.5, "all 5 tasks done")
    burned = time.monotonic() - touched
    tasks = array_tasks(array)
    assert {n: f["JobState"] for n, f in tasks.items()} == dict.fromkeys(range(1, 6), "COMPLETED")
    assert all(f["Restarts"] == "0" and f["ExitCode"] == "0:0" for f in tasks.values())
    first, second = ((tmp_path / f"out-{n}.log").read_text() for n in (1, 2))
    assert "exited 140 (trainguard asked for a requeue): the next task continues" in first
    assert f"resumed from step {stopped_at[0]} " in second
    assert re.search(r"stopping after step (\d+): kill_switch -> exit 0 "
                     r"\(checkpoint saved at step \1: not requeued\)", second)
    for n in (3, 4, 5):
        log = (tmp_path / f"out-{n}.log").read_text()
        assert "is present at start-up: not training (exit 0, no requeue)" in log, log
        assert "saved step" not in log and "resumed from" not in log
    assert burned < 45, burned       # three start-ups, none of them importing torch
    assert (run / "KILL").exists()   # the switch stays until the user removes it
