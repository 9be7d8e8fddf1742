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
from trainguard.stopping.exits import step_in_exit_file

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


def own_step(job: str, exit_file: Path) -> str:
    """The step to end: the one whose rank 0 wrote the exit file (its `step=` line), when it is
    a step of `job`; "" when the file does not say (never a guess: a sidecar step of the same
    job, a data server or a monitor, must not be ended)."""
    try:
        text = exit_file.read_bytes().decode("utf-8", "backslashreplace")
    except OSError:
        return ""
    step = step_in_exit_file(text)
    m = _SRUN_STEP.match(step)
    return step if m and m.group(1) == job else ""


def reap(job: str, pid: int, exit_file: Path, grace: float, say: Callable[[str], None],
         run: Runner = _run) -> None:
    """Rank 0 wrote its exit code and its step still runs after `grace`: a frozen peer whose
    `scancel --signal=KILL` was lost. End that step again (only that one: the exit file names
    it), until Slurm shows it gone; returns when the step's srun (`pid`) has ended."""
    started: float | None = None
    told = False
    while psutil.pid_exists(pid):
        if started is None and exit_file.exists():
            started = time.monotonic()
        if started is not None and time.monotonic() - started >= grace:
            step = own_step(job, exit_file)
            if step and step in job_steps(job, run):
                say(f"rank 0 exited {grace:g} s ago and step {step} still runs: ending it")
                say(end_step(step, run))
            elif not step and not told:
                told = True
                say(f"rank 0 exited {grace:g} s ago, but {exit_file} names no step of job {job}: "
                    "cannot tell which step is the training's; not ending any")
            started = time.monotonic()
        time.sleep(0.5)
