"""The hang path records its suspect: the node of the rank that stopped first, with the
step it reached and where its peers wait, in the run folder's record, so the next start
excludes it. On the real cluster (two gloo ranks on two nodes, one SIGSTOPped), and the
pure part with heartbeats in the test's hand."""
from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from tests.trainguard.support import REQUEUE_SCRIPT, Cluster, wait_for_step
from tests.trainguard.test_hang_slurm import HANG_ENV, TRAIN, heartbeat
from trainguard.hangs.record import suspicion
from trainguard.heartbeat import Heartbeat
from trainguard.recovery import suspects
from trainguard.recovery.suspects import SuspectPolicy


def beat(rank: int, step: int, phase: str, host: str, frames: tuple[str, ...] = ()) -> Heartbeat:
    return Heartbeat(rank=rank, step=step, phase=phase, time=100.0 + rank, pid=1000 + rank, host=host,
                     job_id="42", frames=frames)


def test_the_frozen_ranks_node_is_the_suspect_with_where_its_peers_wait() -> None:
    frozen = beat(1, 57, "train", "node2")
    found = suspicion(frozen, "42", ("all_reduce (distributed_c10d.py:3252)", "main (train_tiny.py:215)"),
                      200.0)
    assert found == suspects.Suspicion("node2", "hang", 200.0, "42", 57,
                                       "rank 1, its peers waiting in all_reduce")
    reported = suspicion(beat(3, 41200, "hung", "node7", ("all_reduce (distributed_c10d.py:2501)",)),
                         "42", (), 1.0)
    assert reported is not None and reported.detail == "rank 3, in all_reduce"
    assert suspicion(beat(1, 5, "train", ""), "42", (), 1.0) is None   # no node named: no suspect


@pytest.mark.slurm
@pytest.mark.timeout(240)
def test_a_hang_records_the_stopped_ranks_node_as_a_suspect_in_the_run_folder(
        cluster: Cluster, tmp_path: Path) -> None:
    run, steps = tmp_path / "run", tmp_path / "steps"
    env = {"RUN_DIR": str(run), "TRAINGUARD_RUN_DIR": str(run), "TRAIN_LAUNCH": "srun",
           "MASTER_ADDR": "127.0.0.1", **HANG_ENV}
    job = cluster.sbatch(REQUEUE_SCRIPT, *TRAIN, "--step-log", str(steps),
                         sbatch_args=("-N", "2", "-n", "2", "-o", str(tmp_path / "out.log")), env=env)
    wait_for_step(steps, 60)
    frozen = heartbeat(run, 1, job)
    os.kill(frozen.pid, signal.SIGSTOP)
    # Rank 0 reports the hang, names rank 1 after the grace and records it, then exits 140.
    cluster.wait_state(job, ("PENDING", "REQUEUED", "REQUEUE_HOLD"), timeout=120)
    found, problems = suspects.read(run)
    assert problems == ()
    # The hang path records it, and the template notes the same failure again when it
    # decides how to go on: one node, one cause, one job (the policy counts it once).
    assert {(s.node, s.cause, s.job) for s in found} == {(frozen.host, "hang", job)}
    mine = next((s for s in found if s.detail.startswith("rank 1")), None)
    assert mine is not None, found
    # The frozen rank's own last heartbeat step (written every second), and where rank 0 waits.
    assert 0 < mine.step <= 60 + 1
    # (DDP's backward or the guard's agreement, depending on where SIGSTOP caught rank 1).
    assert re.fullmatch(r"rank 1, its peers waiting in \w+", mine.detail), mine
    assert suspects.to_exclude(run, mine.at + 1, SuspectPolicy()) == [frozen.host]
