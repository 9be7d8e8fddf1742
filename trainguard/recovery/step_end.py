"""End a job step for sure: `scancel --signal=KILL JOB.STEP`, retried until Slurm no longer
shows the step. Once, a single scancel was lost to a Slurm messaging error; the frozen rank
stayed up and the run stalled until its time limit (issue 22)."""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from trainguard.errors import SlurmError
from trainguard.slurm.run import Reply, run_slurm

Runner = Callable[[Sequence[str]], Reply]
# Batch, extern and interactive steps carry these ids (or names): never ended here.
_SRUN_STEP = re.compile(r"^(\d+)\.(\d+)$")


def _run(argv: Sequence[str]) -> Reply:
    return run_slurm(argv)


def job_steps(job: str, run: Runner = _run) -> list[str]:
    """The job's srun steps ("123.0"), never its batch or extern step."""
    try:
        out = run(["squeue", "-h", "-s", "-j", job, "-o", "%i"]).stdout
    except SlurmError:
        return []
    return [s for s in out.split() if (m := _SRUN_STEP.match(s)) and int(m.group(2)) < 4294967290]


def end_step(step: str, run: Runner = _run, clock: Callable[[], float] = time.monotonic,
             pause: Callable[[float], None] = time.sleep, patience: float = 60.0) -> str:
    """Kill the step, again every 2 s, until it is gone; returns what happened, in words."""
    until, tries, last = clock() + patience, 0, ""
    while True:
        if step not in job_steps(step.split(".")[0], run):
            return f"step {step} ended" + (f" ({tries} scancel)" if tries else " (already gone)")
        if clock() >= until:
            return f"step {step} still shown after {tries} scancel in {patience:g} s: {last or 'no error'}"
        try:
            run(["scancel", "--signal=KILL", step])
        except SlurmError as exc:
            last = str(exc)
        tries += 1
        pause(2.0)


def reap(job: str, pid: int, exit_file: Path, grace: float, say: Callable[[str], None]) -> None:
    """Rank 0 wrote its exit code and the step still runs after `grace`: a frozen peer whose
    `scancel --signal=KILL` was lost. End it again, until Slurm shows it gone; returns when
    the step's srun (`pid`) has ended."""
    started: float | None = None
    while psutil.pid_exists(pid):
        if started is None and exit_file.exists():
            started = time.monotonic()
        if started is not None and time.monotonic() - started >= grace:
            for step in job_steps(job):
                say(f"rank 0 exited {grace:g} s ago and step {step} still runs: ending it")
                say(end_step(step))
            started = time.monotonic()
        time.sleep(0.5)
