"""Shared helpers for the trainguard tests: an injected clock, the example training run
as a real process, and Slurm submission with guaranteed clean-up."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import free_rendezvous_port, job_state, sh, wait_for

REPO = Path(__file__).resolve().parents[2]
TRAIN_TINY = REPO / "slurm" / "train_tiny.py"
REQUEUE_SCRIPT = REPO / "slurm" / "train-requeue.slurm"
ARRAY_SCRIPT = REPO / "slurm" / "train-array.slurm"
TORCHRUN_SCRIPT = REPO / "slurm" / "train-torchrun.slurm"
PYTHON = sys.executable
VENV_BIN = str(Path(sys.executable).parent)
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED")


class ManualClock:
    """A clock the test moves by hand (the guard takes its clocks as arguments)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def train_env(**extra: str) -> dict[str, str]:
    """The environment of a local run: no SLURM_* (so it is not mistaken for a job step)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TRAINGUARD_"))}
    env.update(extra)
    return env


def run_tiny(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, str(TRAIN_TINY), *args], capture_output=True, text=True,
                          timeout=timeout, env=train_env())


def digest_of(output: str) -> str:
    found = re.findall(r"^digest ([0-9a-f]{64})$", output, re.MULTILINE)
    assert found, f"no digest in output:\n{output[-2000:]}"
    return found[-1]


def read_steps(path: Path) -> list[int]:
    return [int(line.split()[1]) for line in path.read_text().splitlines() if line.startswith("step ")]


def assert_no_gap_no_repeat(steps: list[int], total: int) -> None:
    repeats = sorted({s for s in steps if steps.count(s) > 1})
    assert not repeats, f"steps run twice: {repeats[:20]}"
    assert steps == list(range(total)), f"gap: missing {sorted(set(range(total)) - set(steps))[:20]}"


@dataclass
class Cluster:
    """Submits jobs, remembers them, and cancels every one of them at the end of the test."""

    submitted: list[str] = field(default_factory=list)

    def sbatch(self, script: Path | None, *train_args: str, sbatch_args: tuple[str, ...] = (),
               env: dict[str, str] | None = None) -> str:
        """Submit `script` (None: sbatch_args hold a --wrap) with the venv's bin on PATH."""
        # Every node of every dev cluster is this one host, and CI runs three clusters at
        # once, each numbering its jobs from 1: the templates' default rendezvous port (from
        # the job id) made job 76 of one cluster join job 76 of another. A free port each,
        # below the ephemeral range (an in-place restart found its +997 port taken: EADDRINUSE).
        env = {"MASTER_PORT": str(free_rendezvous_port()), **(env or {})}
        exports = ",".join(["ALL", f"PATH={VENV_BIN}:{os.environ['PATH']}",
                            *(f"{k}={v}" for k, v in env.items())])
        target = [str(script), *train_args] if script is not None else []
        out = sh("sbatch", "--parsable", f"--export={exports}", *sbatch_args, *target)
        job_id = out.strip().split(";")[0]
        self.submitted.append(job_id)
        return job_id

    def state(self, job_id: str) -> str:
        return job_state(job_id)

    def field(self, job_id: str, name: str) -> str:
        out = sh("scontrol", "show", "job", "-o", job_id, check=False)
        match = re.search(rf"(?:^|\s){name}=(\S*)", out)
        return match.group(1) if match else ""

    def wait_state(self, job_id: str, states: tuple[str, ...], timeout: float = 60.0) -> str:
        return wait_for(lambda: (s := self.state(job_id)) in states and s, timeout, 0.25,
                        f"job {job_id} in {states} (now {self.state(job_id)})")

    def release_when_requeued(self, job_id: str, restarts: int, timeout: float = 60.0,
                              *updates: str) -> None:
        """Wait until the job was requeued `restarts` times and is pending, then let it start
        now (a requeued job otherwise waits for its BeginTime), with `updates` (Key=Value)."""
        wait_for(lambda: self.field(job_id, "Restarts") == str(restarts)
                 and self.state(job_id) == "PENDING", timeout, 0.25,
                 f"job {job_id} requeued ({restarts}) and pending")
        # slurmd revokes the previous run's credential with a 1-second resolution: a start
        # within the same second is refused ("Job credential revoked") and the job fails.
        time.sleep(1.5)
        sh("scontrol", "update", f"jobid={job_id}", "StartTime=now", *updates)

    def cleanup(self) -> None:
        if not self.submitted:
            return
        sh("scancel", *self.submitted, check=False)
        wait_for(lambda: all(self.state(j) in TERMINAL + ("",) for j in self.submitted), 30, 0.5,
                 "submitted jobs gone")


def wait_for_step(steps_file: Path, at_least: int, timeout: float = 60.0) -> int:
    """Wait until the training logged step `at_least` (it is then inside its loop)."""
    def reached() -> int:
        steps = read_steps(steps_file) if steps_file.exists() else []
        return steps[-1] if steps and steps[-1] >= at_least else 0
    return wait_for(reached, timeout, 0.1, f"step {at_least} in {steps_file}")
