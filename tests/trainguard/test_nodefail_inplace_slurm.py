"""A node failure on the real cluster (issue 22): the templates submit with --no-kill, so a
training node that loses power (its slurmd stopped, its slurmstepd and rank frozen: silent,
as a dead machine is) does not end the job. With a spare, the training restarts in a new step
of the same job on the two other nodes, ends bit-identical to an uninterrupted run, and the
run's record and the log's summary line name the failed node; without a spare, the job
requeues excluding it, asking for its full node count again, and the next run avoids it."""
from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import accounted, privileged, sh, wait_for
from tests.trainguard.support import PYTHON, REQUEUE_SCRIPT, TORCHRUN_SCRIPT, Cluster, wait_for_step
from tests.trainguard.test_hang_slurm import HANG_ENV, heartbeat
from tests.trainguard.test_inplace_slurm import digests, hostnames
from tests.trainguard.test_inplace_slurm import reference as two_rank_reference
from tests.trainguard.test_slurm_torchrun import PER_NODE, STEPS, four_rank_reference  # noqa: F401 - a fixture

pytestmark = pytest.mark.slurm
# Long enough that the node fails mid-training on a loaded machine (the hang tests' 260 end
# within seconds of the first logged step).
TRAIN = ("--steps", "500", "--step-sleep", "0.03", "--save-every", "25")


def cluster_dir() -> str:
    return str(Path(os.environ["SLURM_CONF"]).parent)


def node_state(node: str) -> str:
    # One line per partition of the node: the same state in each.
    return ",".join(sorted(set(sh("sinfo", "-h", "-N", "-n", node, "-o", "%t", check=False).split())))


@pytest.fixture
def power_loss() -> Iterator[Callable[[str], None]]:
    """Fails a node like a power loss (root's daemons: tests/privileged.py), and brings every
    node it failed back to service afterwards (its frozen processes die with the "reboot"),
    whatever the test did: the cluster is shared by the whole suite."""
    killed: list[str] = []

    def kill(node: str) -> None:
        killed.append(node)
        privileged("node-kill", cluster_dir(), node)

    yield kill
    for node in killed:
        privileged("node-start", cluster_dir(), node)
    for node in killed:
        back_in_service(node)


def back_in_service(node: str) -> None:
    # ReturnToService=2: the node returns by itself once its slurmd registers again.
    wait_for(lambda: node_state(node) == "idle", 120, 0.5,
             f"{node} back in service (now {node_state(node)!r})")


def runs_in_accounting(job: str) -> list[str]:
    """One line per run of the job (sacct -D lists the runs a requeue ended too)."""
    return sh("sacct", "-n", "-X", "-D", "-P", "-j", job, "-o", "JobID,State,NodeList").split()


def training_steps(job: str) -> list[str]:
    """The node lists of the job's training steps, in order (not the template's signal post)."""
    rows = sh("sacct", "-n", "-P", "-j", job, "-o", "JobID,JobName,NodeList").split()
    found = (r.split("|") for r in rows)
    return [nodes for s, name, nodes in found if re.fullmatch(rf"{job}\.\d+", s) and name != "signal-post"]


def suspicions(run: Path) -> list[dict[str, object]]:
    dump = subprocess.run([PYTHON, "-m", "trainguard.recovery", "dump", "--run-dir", str(run)],
                          capture_output=True, text=True, check=True, timeout=60).stdout
    return [e for e in json.loads(dump)["entries"] if "cause" in e and "node" in e and "detail" in e]


def training_node(run: Path, job: str, cluster: Cluster) -> str:
    """The node of rank 1: a training node that is not the batch host."""
    node = heartbeat(run, 1, job).host
    assert node != cluster.field(job, "BatchHost"), "rank 1 runs on the batch host"
    return node


@pytest.mark.timeout(300)
def test_with_a_spare_a_failed_node_restarts_the_training_in_the_same_job_on_the_others_identical(
        cluster: Cluster, tmp_path: Path, power_loss: Callable[[str], None]) -> None:
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    env = {"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1", "TRAIN_NODES": "2",
           **HANG_ENV}
    ref, ref_out = two_rank_reference(cluster, tmp_path, env, TRAIN)
    job = cluster.sbatch(REQUEUE_SCRIPT, *TRAIN, "--step-log", str(steps), env=env,
                         sbatch_args=("-p", "spare", "-N", "3", "--ntasks-per-node=1", "-o", str(out)))
    wait_for_step(steps, 60)
    failed = training_node(run, job, cluster)
    power_loss(failed)
    cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"), timeout=220)
    log = out.read_text()
    restarted = re.search(r"restarting in place on (\S+)", log)
    assert restarted, log[-4000:]
    nodes = hostnames(restarted.group(1))
    assert failed not in nodes and len(nodes) == 2, (failed, nodes)
    # The same job, one run, never requeued; a second step on the two other nodes.
    assert cluster.state(job) == "COMPLETED" and cluster.field(job, "Restarts") == "0", log[-3000:]
    # sacct records the node's removal as a resize of the run (RESIZING), not as a run. It lags
    # slurmctld by a moment: read it once it has the end (it once still said RUNNING here).
    wait_for(lambda: accounted(job), 60, what=f"accounting of job {job}'s end")
    states = [r.split("|")[1] for r in runs_in_accounting(job)]
    assert [s for s in states if s != "RESIZING"] == ["COMPLETED"], runs_in_accounting(job)
    steps = training_steps(job)
    assert len(steps) == 2 and failed not in hostnames(steps[1]) and len(hostnames(steps[1])) == 2, steps
    assert "requeueing" not in log.replace("not requeueing", "")
    # The run's record: the failed node, cause node_fail, what Slurm said.
    # (Its peers waited for the silent node: the hang they reported is there too.)
    mine = [s for s in suspicions(run) if s["node"] == failed and s["cause"] == "node_fail"]
    assert len(mine) == 1 and "NODE_FAIL" in str(mine[0]["detail"]), suspicions(run)
    # One line a tired reader understands: which node, what was done, where it went on.
    summary = re.search(r"summary=(.*)", log)
    assert summary, log[-3000:]
    assert re.match(rf"{failed} failed at step [\d,]+ \(NODE_FAIL: [^)]*\); {failed} excluded; "
                    rf"training resumed at \d\d:\d\d on {restarted.group(1)} from step [\d,]+",
                    summary.group(1)), summary.group(1)
    cluster.wait_state(ref, ("COMPLETED",), timeout=90)
    expected = digests(ref_out.read_text())
    assert len(expected) == 1 and digests(log) == expected, log[-3000:]


@pytest.mark.timeout(300)
def test_without_a_spare_a_failed_node_requeues_the_job_excluding_it_with_its_node_count(
        cluster: Cluster, tmp_path: Path, power_loss: Callable[[str], None]) -> None:
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    env = {"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1", **HANG_ENV}
    ref, ref_out = two_rank_reference(cluster, tmp_path, env, TRAIN)
    # Two nodes of the three-node partition: without the failed one, two are still usable.
    job = cluster.sbatch(REQUEUE_SCRIPT, *TRAIN, "--step-log", str(steps), env=env,
                         sbatch_args=("-p", "spare", "-N", "2", "--ntasks-per-node=1", "-o", str(out)))
    wait_for_step(steps, 60)
    failed = training_node(run, job, cluster)
    power_loss(failed)
    wait_for(lambda: cluster.field(job, "Restarts") == "1", 150, 0.25, f"job {job} requeued")
    assert failed in hostnames(cluster.field(job, "ExcNodeList")), cluster.field(job, "ExcNodeList")
    cluster.release_when_requeued(job, 1)
    cluster.wait_state(job, ("COMPLETED", "FAILED"), timeout=150)
    log = out.read_text()
    assert re.search(rf"requeueing, excluding {failed}", log), log[-3000:]
    # The next run had both nodes again, none of them the failed one.
    last = hostnames(cluster.field(job, "NodeList"))
    assert len(last) == 2 and failed not in last, (last, log[-3000:])
    assert re.search(rf"summary={failed} failed at step [\d,]+ \(NODE_FAIL: [^)]*\); {failed} excluded; "
                     rf"job {job} requeued", log), log[-3000:]
    cluster.wait_state(ref, ("COMPLETED",), timeout=90)
    assert cluster.state(job) == "COMPLETED" and digests(log) == digests(ref_out.read_text()), log[-3000:]


@pytest.mark.timeout(400)
def test_torchrun_with_a_spare_a_failed_node_restarts_in_place_identical(
        cluster: Cluster, tmp_path: Path, power_loss: Callable[[str], None],
        four_rank_reference: subprocess.Popen[str]) -> None:  # noqa: F811 - the fixture imported above, by name
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    job = cluster.sbatch(TORCHRUN_SCRIPT, "--steps", str(STEPS), "--step-sleep", "0.03", "--save-every", "25",
                         "--step-log", str(steps),
                         sbatch_args=("-p", "spare", "-N", "3", "-c", str(PER_NODE), "-o", str(out)),
                         env={"RUN_DIR": str(run), "NPROC_PER_NODE": str(PER_NODE), "TRAIN_NODES": "2",
                              **HANG_ENV})
    wait_for_step(steps, 60, timeout=120)
    # A worker's node that is not the batch host (torchrun numbers the nodes as they meet).
    batch = cluster.field(job, "BatchHost")
    failed = next(h for h in (heartbeat(run, r, job).host for r in range(2 * PER_NODE)) if h != batch)
    power_loss(failed)
    cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=300)
    log = out.read_text()
    restarted = re.search(r"restarting in place on (\S+)", log)
    assert restarted and failed not in hostnames(restarted.group(1)), log[-4000:]
    assert cluster.field(job, "Restarts") == "0" and cluster.state(job) == "COMPLETED", log[-3000:]
    assert re.search(rf"summary={failed} failed at step [\d,]+ \(NODE_FAIL: ", log), log[-3000:]
    reference, err = four_rank_reference.communicate(timeout=120)
    assert four_rank_reference.returncode == 0, err[-3000:]
    assert len(digests(reference)) == 1 and digests(log) == digests(reference)
