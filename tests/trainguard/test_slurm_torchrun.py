"""train-torchrun.slurm on two nodes of the real cluster, two workers per node (gloo): the
batch shell's warning reaches every worker on every node, all four stop at the same step,
140 survives torchrun, and the requeued job resumes bit-identically."""
from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import sh
from tests.trainguard.support import (
    TORCHRUN_SCRIPT,
    TRAIN_TINY,
    VENV_BIN,
    Cluster,
    assert_no_gap_no_repeat,
    read_steps,
    train_env,
    wait_for_step,
)

pytestmark = pytest.mark.slurm
STEPS, NODES, PER_NODE = 200, 2, 2


@pytest.fixture
def four_rank_reference() -> Iterator[subprocess.Popen[str]]:
    """An uninterrupted 4-worker run on this machine (torchrun --standalone), started in the
    background while the cluster job runs."""
    proc = subprocess.Popen([f"{VENV_BIN}/torchrun", "--standalone", f"--nproc-per-node={NODES * PER_NODE}",
                             str(TRAIN_TINY), "--steps", str(STEPS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=train_env())
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def digests(text: str) -> set[str]:
    return set(re.findall(r"^digest ([0-9a-f]{64})$", text, re.MULTILINE))


@pytest.mark.timeout(300)
def test_two_nodes_the_warning_stops_every_worker_at_one_step_and_the_job_resumes_bit_identical(
        cluster: Cluster, tmp_path: Path, four_rank_reference: subprocess.Popen[str]) -> None:
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    # No MASTER_ADDR given: the template resolves the first node (node1 -> its NodeAddr).
    job = cluster.sbatch(TORCHRUN_SCRIPT, "--steps", str(STEPS), "--step-sleep", "0.03",
                         "--step-log", str(steps),
                         sbatch_args=("-N", str(NODES), "-c", str(PER_NODE), "-o", str(out)),
                         env={"RUN_DIR": str(run), "NPROC_PER_NODE": str(PER_NODE)})
    wait_for_step(steps, 20, timeout=120)
    sh("scancel", "--batch", "--signal=USR1", job)           # the warning: the batch shell only
    cluster.release_when_requeued(job, 1, 90)
    cluster.wait_state(job, ("COMPLETED",), timeout=150)
    log = out.read_text()
    # The signal reached the workers (ranks 0-1 and 2-3 are one node each), each logging it
    # once. Which node's ranks log it is a race: under load the stop can be agreed (a peer's
    # signal, the stop file) and a node's ranks gone before its own signal lands; a rank
    # still alive then names it at its exit ("after the stop was decided").
    received = re.findall(r"rank(\d) WARNING trainguard: received (\w+)", log)
    assert received and {sig for _, sig in received} == {"SIGUSR1"}, received
    assert len(received) == len({r for r, _ in received}), received
    stops = re.findall(r"rank(\d) WARNING trainguard: stopping after step (\d+): (\w+) -> exit (\d+)", log)
    assert sorted(r for r, *_ in stops) == ["0", "1", "2", "3"]
    assert len({tuple(s[1:]) for s in stops}) == 1 and stops[0][2:] == ("user_signal", "140"), stops
    assert "nodes node[1-2], 4 rank(s)" in log
    assert len(re.findall(r"exited 140 \(.*; checkpoint saved at step \d+\): requeueing", log)) == 1
    assert len(re.findall(rf"resumed from step {stops[0][1]} ", log)) == 4
    assert_no_gap_no_repeat(read_steps(steps), STEPS)
    reference, err = four_rank_reference.communicate(timeout=120)
    assert four_rank_reference.returncode == 0, err[-3000:]
    assert len(digests(reference)) == 1 and digests(log) == digests(reference)
