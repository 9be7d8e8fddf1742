"""Two ranks with gloo on the real cluster: they agree on the step to stop at, whoever got
the signal, and the stop-request file works with no signal at all. (torchrun on two
nodes: test_slurm_torchrun.py.)"""
from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.trainguard.support import (
    REQUEUE_SCRIPT,
    Cluster,
    assert_no_gap_no_repeat,
    read_steps,
    wait_for_step,
)

pytestmark = pytest.mark.slurm


def rank_stops(log: str) -> dict[int, list[int]]:
    stops: dict[int, list[int]] = {0: [], 1: []}
    for rank, step in re.findall(r"rank(\d) WARNING trainguard: stopping after step (\d+)", log):
        stops[int(rank)].append(int(step))
    return stops


def heartbeat_pid(run: Path, rank: int, job: str) -> int:
    path = run / "heartbeat" / f"rank-{rank}.json"
    record = wait_for(lambda: path.exists() and (r := json.loads(path.read_text()))["job_id"] == job
                      and r, 60, 0.2, f"rank {rank}'s heartbeat")
    return int(record["pid"])


@pytest.mark.timeout(180)
def test_two_ranks_stop_at_the_same_step_on_one_ranks_signal_and_on_the_stop_file_alone(
        cluster: Cluster, tmp_path: Path) -> None:
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    job = cluster.sbatch(REQUEUE_SCRIPT, "--steps", "300", "--step-sleep", "0.03", "--step-log", str(steps),
                         sbatch_args=("-n", "2", "-o", str(out)),
                         env={"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1"})
    # 1. USR1 to rank 1 alone (as when a launcher signals one process): both stop.
    wait_for_step(steps, 20)
    os.kill(heartbeat_pid(run, 1, job), signal.SIGUSR1)
    cluster.release_when_requeued(job, 1)
    # 2. No signal at all: only the stop-request file, as the batch script's trap writes it.
    wait_for_step(steps, read_steps(steps)[-1] + 20)
    (run / "stop-request").write_text(f"USR1 {job} 1\n")
    cluster.release_when_requeued(job, 2)
    cluster.wait_state(job, ("COMPLETED",), timeout=90)
    log = out.read_text()
    stops = rank_stops(log)
    assert stops[0] == stops[1] and len(stops[0]) == 2, stops
    assert re.findall(r"rank(\d) WARNING trainguard: received (\w+)", log) == [("1", "SIGUSR1")]
    assert re.search(r"rank0 WARNING trainguard: stop-request file .* says SIGUSR1", log)
    assert len(re.findall(r"exited 140 \(.*; checkpoint saved at step \d+\): requeueing", log)) == 2
    assert_no_gap_no_repeat(read_steps(steps), 300)
    digests = re.findall(r"^digest ([0-9a-f]{64})$", log, re.MULTILINE)
    assert len(digests) == 2 and digests[0] == digests[1]   # the ranks ended identical
