"""The scenarios shared by the Hugging Face Trainer and accelerate tests: the example
trainings in slurm/examples/ as real processes, under train-requeue.slurm and
train-torchrun.slurm on the real cluster."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

from tests.helpers import sh, wait_for
from tests.trainguard.support import (
    PYTHON,
    REPO,
    REQUEUE_SCRIPT,
    TORCHRUN_SCRIPT,
    Cluster,
    assert_no_gap_no_repeat,
    digest_of,
    read_steps,
    train_env,
    wait_for_step,
)

HF_TINY = REPO / "slurm" / "examples" / "hf_tiny.py"
ACCELERATE_TINY = REPO / "slurm" / "examples" / "accelerate_tiny.py"
# Switch files polled often, so that a test waits a few steps, not 2 s, for them.
FAST_FILES = ("--guard", "file_every=0.2")


class Reference:
    """An uninterrupted local run of an example, started at once (it overlaps the cluster
    job's start-ups) and read at the end: its final weight digest."""

    def __init__(self, script: Path, cwd: Path, *args: str) -> None:
        self._proc = subprocess.Popen([PYTHON, str(script), *args], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=train_env(), cwd=cwd)

    def digest(self) -> str:
        out, err = self._proc.communicate(timeout=180)
        assert self._proc.returncode == 0, err[-3000:]
        return digest_of(out)


def stops(log: str) -> list[tuple[int, str, int]]:
    """(step, cause, exit code) of every 'stopping after step' line."""
    return [(int(m[0]), m[1], int(m[2])) for m in
            re.findall(r"stopping after step (\d+): (\w+).*?-> exit (\d+)", log)]


def rank_stops(log: str) -> dict[int, list[tuple[int, str, int]]]:
    found: dict[int, list[tuple[int, str, int]]] = {0: [], 1: []}
    for rank, step, cause, code in re.findall(
            r"rank(\d) WARNING trainguard: stopping after step (\d+): (\w+).*?-> exit (\d+)", log):
        found[int(rank)].append((int(step), cause, int(code)))
    return found


def last_step(steps: Path) -> int:
    found = read_steps(steps) if steps.exists() else []
    return found[-1] if found else -1


def submit_requeue(cluster: Cluster, tmp_path: Path, script: Path, *args: str) -> str:
    return cluster.sbatch(REQUEUE_SCRIPT, *args, *FAST_FILES, "--step-log", str(tmp_path / "steps"),
                          sbatch_args=("-o", str(tmp_path / "out.log")),
                          env={"RUN_DIR": str(tmp_path / "run"), "TRAIN_SCRIPT": str(script)})


def three_warnings_and_a_save_switch(cluster: Cluster, tmp_path: Path, job: str, total: int) -> str:
    """USR1 to the batch shell three times, a few, some and more steps into each run, the
    save switch in the middle of the second run; then the job runs to its end. Returns the log."""
    steps, switch = tmp_path / "steps", tmp_path / "run" / "SAVE"
    for restart, ahead in ((1, 4), (2, 12), (3, 9)):
        if restart == 2:
            wait_for_step(steps, last_step(steps) + 3)
            switch.touch()
            wait_for(lambda: not switch.exists(), 30, 0.1, "the save switch consumed")
        wait_for_step(steps, last_step(steps) + ahead)
        sh("scancel", "--batch", "--signal=USR1", job)     # like SLURM's warning: the shell only
        cluster.release_when_requeued(job, restart)
    cluster.wait_state(job, ("COMPLETED",), timeout=120)
    log = (tmp_path / "out.log").read_text()
    assert [(cause, code) for _, cause, code in stops(log)] == [("user_signal", 140)] * 3, stops(log)
    # One save per stop and one for the switch: the framework saved nothing on its own.
    saved = [int(s) for s in re.findall(r"trainguard: saved step (\d+)", log)]
    assert len(saved) == 4 and len(set(saved)) == 4, saved
    assert set(saved) > {step for step, _, _ in stops(log)}
    assert len(re.findall(r"exited 140 \(.*; checkpoint saved at step \d+\): requeueing", log)) == 3
    assert re.search(r"training exited 0( \(.*\))?: not requeueing", log)
    assert_no_gap_no_repeat(read_steps(steps), total)
    return log


def heartbeat_pid(run: Path, rank: int, job: str) -> int:
    path = run / "heartbeat" / f"rank-{rank}.json"

    def pid() -> int:
        record = json.loads(path.read_text()) if path.exists() else {}
        return int(record["pid"]) if record.get("job_id") == job else 0
    return wait_for(pid, 90, 0.2, f"rank {rank}'s heartbeat")


def two_ranks_signal_one_then_kill_switch(cluster: Cluster, tmp_path: Path, script: Path,
                                          *args: str, steps_done_at_stop: int = 1) -> str:
    """torchrun, 2 ranks, gloo: USR1 to rank 1 alone -> both save and stop at one step,
    requeue; in the next run the kill switch -> both save and stop, exit 0, no requeue.
    `steps_done_at_stop`: steps logged at "stopping after step N" are N + this (the HF
    Trainer counts completed steps: 0). Returns the log."""
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    job = cluster.sbatch(TORCHRUN_SCRIPT, *args, *FAST_FILES, "--step-log", str(steps),
                         sbatch_args=("-c", "2", "-o", str(out)),
                         env={"RUN_DIR": str(run), "NPROC_PER_NODE": "2", "MASTER_ADDR": "127.0.0.1",
                              "TRAIN_SCRIPT": str(script)})
    wait_for_step(steps, 5, timeout=90)
    os.kill(heartbeat_pid(run, 1, job), signal.SIGUSR1)
    cluster.release_when_requeued(job, 1, 90)
    wait_for_step(steps, last_step(steps) + 5, timeout=90)
    (run / "KILL").touch()
    cluster.wait_state(job, ("COMPLETED",), timeout=90)
    log = out.read_text()
    found = rank_stops(log)
    assert found[0] == found[1] and len(found[0]) == 2, found
    (first, cause1, code1), (second, cause2, code2) = found[0]
    assert (cause1, code1, cause2, code2) == ("user_signal", 140, "kill_switch", 0)
    assert re.findall(r"rank(\d) WARNING trainguard: received (\w+)", log) == [("1", "SIGUSR1")]
    assert len(re.findall(r"exited 140 \(.*; checkpoint saved at step \d+\): requeueing", log)) == 1
    assert re.search(r"training exited 0( \(.*\))?: not requeueing", log)
    assert cluster.field(job, "Restarts") == "1" and cluster.field(job, "ExitCode") == "0:0"
    assert_no_gap_no_repeat(read_steps(steps), second + steps_done_at_stop)
    return log
