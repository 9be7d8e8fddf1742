"""Training health on the real cluster: a run whose learning rate makes the loss NaN near
step 50 ends with exit 5 and is not requeued, and the `training` check names the step; two
ranks on two nodes, one slowed by a real cgroup v1 CPU quota on its process: the slow rank
and its node are named within a few windows, and not in the unslowed control run."""
from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.checks.conftest import tick, write_config
from tests.helpers import privileged, sh, wait_for
from tests.trainguard.support import REQUEUE_SCRIPT, Cluster
from watchdogs.result import Status
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm
CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
# Short windows for a test; the factor is 3 (default 1.5) because all "nodes" of the dev
# cluster share this machine's two cores with other test runs: over 4 s windows their run
# queues differ by up to ~2x without any quota (seen in the control run at 1.5).
WINDOWS = {"TRAINGUARD_HEALTH_WINDOW": "4s", "TRAINGUARD_HEALTH_WARMUP": "8s",
           "TRAINGUARD_HEARTBEAT_EVERY": "1s", "TRAINGUARD_STRAGGLER_FACTOR": "3"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    db = StateStore(tmp_path / "state")
    yield db
    db.close()


def training_check(tmp_path: Path, heartbeats: Path, job_name: str) -> str:
    return (f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{job_name}"\n'
            f'[[check]]\nname = "learning"\ntype = "training"\nheartbeats = "{heartbeats}"\njob = "train"\n')


def record(run: Path, rank: int, job: str) -> dict:
    path = run / "heartbeat" / f"rank-{rank}.json"
    data: dict = json.loads(path.read_text()) if path.exists() else {}
    return data if data.get("job_id") == job else {}


@pytest.mark.timeout(240)
def test_a_loss_that_turns_nan_ends_the_job_with_exit_5_not_requeued_and_the_alert_names_the_step(
        cluster: Cluster, tmp_path: Path, store: StateStore) -> None:
    run, out, name = tmp_path / "run", tmp_path / "out.log", f"nan-{tmp_path.name[-8:]}"
    job = cluster.sbatch(REQUEUE_SCRIPT, "--steps", "400", "--lr-jump-step", "50", "--save-every", "10",
                         "--step-sleep", "0.02",
                         sbatch_args=("-o", str(out), "-J", name), env={"RUN_DIR": str(run)})
    cluster.wait_state(job, ("FAILED", "COMPLETED"), timeout=180)
    assert sh("sacct", "-n", "-X", "-P", "-j", job, "-o", "ExitCode").strip() == "5:0"
    assert cluster.field(job, "Restarts") == "0"
    log = out.read_text()
    said = next(line for line in log.splitlines() if "training exited 5" in line)
    assert "training exited 5 (loss NaN/Inf; the poisoned state was not saved" in said, log[-2000:]
    assert said.endswith(": not requeueing") and "after step" in said, said
    found = re.search(r"trainguard: loss nan at step (\d+)", log)
    assert found, log[-3000:]
    step = int(found.group(1))
    config = write_config(tmp_path, training_check(tmp_path, run / "heartbeat", name))
    result = tick(config, store)[0]["learning"]
    assert result.status is Status.CRITICAL
    assert re.fullmatch(rf"loss NaN at step {step:,} \(last finite [\d.e-]+ at step [\d,]+\); stopped after "
                        rf"step {step:,}, not requeued \(exit 5\); last good checkpoint step (\d+)",
                        result.summary), result.summary
    assert int(result.summary.rsplit(" ", 1)[1]) < 51      # nothing saved after the jump


@pytest.fixture
def cpu_quota() -> Iterator[Callable[[int], None]]:
    """A real cgroup v1 CPU quota (5 % of one CPU) on one of the job's processes. Creating the
    cgroup and moving a process into it needs root: tests/privileged.py does only that (for
    the test user through sudo, and only for the caller's own process); the job, the training
    and the check run as the ordinary user. Moved back and removed afterwards."""
    if not (CPU_CGROUP / "cpu.cfs_quota_us").exists():
        pytest.skip("no cgroup v1 cpu controller")
    moved: list[int] = []

    def throttle(pid: int) -> None:
        privileged("cpu-quota", str(pid), "5")
        moved.append(pid)
    try:
        yield throttle
    finally:
        for pid in moved:
            privileged("cpu-quota-end", str(pid))


def job_name(tmp_path: Path) -> str:
    return f"strag-{tmp_path.name[-8:]}"


def two_node_run(cluster: Cluster, tmp_path: Path) -> tuple[str, Path, Path]:
    run, out = tmp_path / "run", tmp_path / "out.log"
    job = cluster.sbatch(REQUEUE_SCRIPT, "--steps", "100000000", "--burn", "30",
                         sbatch_args=("-N", "2", "-n", "2", "-o", str(out), "-J", job_name(tmp_path)),
                         env={"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1",
                              **WINDOWS})
    # Both ranks have closed a window after warm-up: the baseline and compute times exist.
    # Up to 4 min: CI's release matrix runs three suites on two cores, and this job's ranks
    # then wait for the CPU before the quota is even set.
    wait_for(lambda: all(record(run, r, job).get("health", {}).get("baseline", 0) > 0 for r in (0, 1)),
             240, 0.5, "both ranks past warm-up")
    return job, run, out


@pytest.mark.timeout(480)
def test_a_rank_slowed_by_a_cpu_quota_is_named_with_its_node_within_a_few_windows(
        cluster: Cluster, tmp_path: Path, store: StateStore, cpu_quota: Callable[[int], None]) -> None:
    job, run, out = two_node_run(cluster, tmp_path)
    slow = record(run, 1, job)
    assert record(run, 0, job)["host"] != slow["host"]       # two nodes
    cpu_quota(int(slow["pid"]))
    throttled = time.monotonic()
    pattern = rf"rank0 WARNING trainguard: rank 1 on {slow['host']} takes ([\d.]+)× the other ranks' median"
    found = wait_for(lambda: re.search(pattern, out.read_text()), 90, 0.5, "the straggler named in the log")
    latency = time.monotonic() - throttled
    print(f"straggler named {latency:.1f} s after the quota ({found.group(1)}×)")
    assert latency < 8 * 4.0 + 10      # a few 4 s windows (3 readings in a row), plus the agreement
    config = write_config(tmp_path, training_check(tmp_path, run / "heartbeat", job_name(tmp_path)))
    result = wait_for(lambda: (r := tick(config, store)[0]["learning"]).status is Status.WARNING
                      and "straggler:rank1" in r.fingerprint and r, 30, 1.0, "the training check's warning")
    said = " ".join((result.summary, *result.details))
    assert re.search(rf"rank 1 on {slow['host']} takes [\d.]+× the other ranks' median compute per step "
                     r"\([\d.]+ s vs [\d.]+ s\) for \d+ (s|min)", said), said


@pytest.mark.timeout(480)
def test_no_straggler_is_named_in_the_unslowed_control_run(cluster: Cluster, tmp_path: Path) -> None:
    job, run, out = two_node_run(cluster, tmp_path)
    # Longer than the slowed run above takes to be named: fifteen windows of 4 s.
    until = record(run, 0, job)["time"] + 60
    wait_for(lambda: record(run, 0, job).get("time", 0) >= until, 90, 1.0, "ten more windows")
    log = out.read_text()
    assert not re.search(r"trainguard: rank \d+ on \S+ takes", log), log[-3000:]
    for rank in (0, 1):
        assert not [f for f in record(run, rank, job)["health"]["findings"] if f["kind"] == "straggler"]
