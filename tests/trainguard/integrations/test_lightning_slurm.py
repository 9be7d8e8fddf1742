"""TrainguardCallback in a real Lightning training on the real cluster, with Lightning's
SLURM handling left at its defaults (SLURMEnvironment, auto-requeue on): warnings requeue
and resume bit-identically, the switches work, and two DDP ranks (gloo) agree."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import sh, wait_for
from tests.trainguard.integrations.lightning_support import LIGHTNING_TINY, submit_lightning
from tests.trainguard.support import (
    PYTHON,
    Cluster,
    assert_no_gap_no_repeat,
    digest_of,
    read_steps,
    train_env,
    wait_for_step,
)

pytestmark = pytest.mark.slurm
STEPS = 150


@pytest.fixture(scope="module")
def uninterrupted() -> Iterator[Callable[[], str]]:
    """The digest of an uninterrupted local run, started at once in the background (it
    overlaps the first cluster job) and awaited when a test needs it."""
    proc = subprocess.Popen([PYTHON, str(LIGHTNING_TINY), "--steps", str(STEPS)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=train_env())

    def digest() -> str:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        return digest_of(out)
    yield digest
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def stops(log: str) -> list[tuple[int, int, str, int]]:
    """(rank, step, cause, exit code) of every 'stopping after step' line."""
    return [(int(m[0]), int(m[1]), m[2], int(m[3])) for m in
            re.findall(r"rank(\d) WARNING trainguard: stopping after step (\d+): (\w+).*?-> exit (\d+)", log)]


def last_step(steps: Path) -> int:
    found = read_steps(steps) if steps.exists() else []
    return found[-1] if found else -1


@pytest.mark.timeout(420)
def test_three_warnings_requeue_a_lightning_run_and_it_ends_bit_identical(
        cluster: Cluster, tmp_path: Path, uninterrupted: Callable[[], str]) -> None:
    job = submit_lightning(cluster, tmp_path, "--steps", str(STEPS), "--step-sleep", "0.04")
    steps = tmp_path / "steps"
    for restart, after in ((1, 7), (2, 23), (3, 41)):     # varied moments
        wait_for_step(steps, last_step(steps) + after, timeout=120)
        sh("scancel", "--batch", "--signal=USR1", job)   # like SLURM's warning: the shell only
        cluster.release_when_requeued(job, restart, 90)
    cluster.wait_state(job, ("COMPLETED",), timeout=150)
    log = (tmp_path / "out.log").read_text()
    # One save, one exit code and one requeue per signal: Lightning's own auto-requeue
    # (hpc_ckpt_*.ckpt + its own scontrol requeue) and its SIGTERM path never ran.
    assert [(cause, code) for _, _, cause, code in stops(log)] == [("user_signal", 140)] * 3
    assert len(re.findall(r"trainguard: saved step", log)) == 3
    assert len(re.findall(r"exited 140 \(.*; checkpoint saved at step \d+\): requeueing", log)) == 3
    assert not list((tmp_path / "root").glob("hpc_ckpt_*")) and "auto-requeue" not in log
    assert cluster.field(job, "Restarts") == "3"
    resumed = [int(s) for s in re.findall(r"resumed from step (\d+)", log)]
    assert resumed == [step for _, step, _, _ in stops(log)]
    assert_no_gap_no_repeat(read_steps(steps), STEPS)
    assert digest_of(log) == uninterrupted()


@pytest.mark.timeout(240)
def test_the_save_switch_saves_and_goes_on_and_the_kill_switch_saves_and_ends_without_requeue(
        cluster: Cluster, tmp_path: Path) -> None:
    job = submit_lightning(cluster, tmp_path, "--steps", "3000", "--step-sleep", "0.03")
    steps, run = tmp_path / "steps", tmp_path / "run"
    wait_for_step(steps, 10, timeout=120)
    (run / "SAVE").touch()
    wait_for(lambda: not (run / "SAVE").exists(), 30, 0.1, "the save switch consumed")
    saved = int(re.findall(r"saved step (\d+)", (tmp_path / "out.log").read_text())[0])
    wait_for_step(steps, saved + 10)                    # it trains on after the save
    (run / "KILL").touch()
    cluster.wait_state(job, ("COMPLETED",), timeout=60)
    log = (tmp_path / "out.log").read_text()
    (_, step, cause, code), = stops(log)
    assert (cause, code) == ("kill_switch", 0) and step > saved
    assert [int(s) for s in re.findall(r"saved step (\d+)", log)] == [saved, step]
    assert {p.name for p in (run / "checkpoints").glob("step-*")} == {f"step-{saved:08d}", f"step-{step:08d}"}
    # ended, not finished
    assert re.search(r"training exited 0( \(.*\))?: not requeueing", log) and "digest" not in log
    assert cluster.field(job, "Restarts") == "0" and read_steps(steps)[-1] == step


def heartbeat_pid(run: Path, rank: int, job: str) -> int:
    path = run / "heartbeat" / f"rank-{rank}.json"
    record = wait_for(lambda: path.exists() and (r := json.loads(path.read_text()))["job_id"] == job
                      and r, 120, 0.2, f"rank {rank}'s heartbeat")
    return int(record["pid"])


@pytest.mark.timeout(240)
def test_two_ddp_ranks_stop_at_the_same_step_when_only_one_rank_gets_the_signal(
        cluster: Cluster, tmp_path: Path) -> None:
    # Lightning's SLURMEnvironment wants --ntasks-per-node (it refuses --ntasks).
    job = submit_lightning(cluster, tmp_path, "--steps", "3000", "--step-sleep", "0.03",
                           sbatch_args=("-N", "1", "--ntasks-per-node=2"),
                           env={"TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1"})
    steps, run = tmp_path / "steps", tmp_path / "run"
    pid = heartbeat_pid(run, 1, job)
    wait_for_step(steps, 15, timeout=120)
    os.kill(pid, signal.SIGUSR1)
    # Requeued: the stop, the save and the exit codes are all in the log (the resume of a
    # Lightning run is the first test's subject).
    wait_for(lambda: cluster.field(job, "Restarts") == "1", 60, 0.25, "the job requeued")
    log = (tmp_path / "out.log").read_text()
    assert re.findall(r"rank(\d) WARNING trainguard: received (\w+)", log) == [("1", "SIGUSR1")]
    (r0, step0, cause0, code0), (r1, step1, cause1, code1) = sorted(stops(log))
    assert (r0, r1) == (0, 1) and step0 == step1
    assert (cause0, code0) == (cause1, code1) == ("user_signal", 140)
    exits = re.findall(r"srun: error: \S+: tasks? ([\d,-]+): Exited with exit code (\d+)", log)
    assert {code for _, code in exits} == {"140"} and {t for t, _ in exits} in ({"0-1"}, {"0", "1"}), exits
    assert read_steps(steps)[-1] == step0                 # neither rank trained past the stop
    # One checkpoint of that step, committed once: the file Lightning wrote on rank 0.
    committed = run / "checkpoints" / f"step-{step0:08d}"
    marker = json.loads((committed / "COMPLETE.json").read_text())
    assert marker["step"] == step0 and list(marker["files"]) == ["lightning.ckpt"]
    assert sorted(p.name for p in (run / "checkpoints").glob("step-*")) == [committed.name]
