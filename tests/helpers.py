"""Small helpers shared by the tests: run a command, wait for a condition, Slurm look-ups."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

from watchdogs.slurmctl.runner import run_slurm
from watchdogs.slurmctl.sacct import run_sacct

T = TypeVar("T")


def sh(*argv: str, timeout: float = 30.0, check: bool = True) -> str:
    """Run argv (never a shell string) and return stdout."""
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=timeout).stdout


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.3,
             what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what} not met within {timeout}s")


def job_state(job_id: str) -> str:
    """JobState from `scontrol show job` ('' when the controller no longer knows the job)."""
    out = sh("scontrol", "show", "job", job_id, check=False)
    for token in out.split():
        if token.startswith("JobState="):
            return token.split("=", 1)[1]
    return ""


def cancel(*job_ids: str) -> None:
    if job_ids:
        sh("scancel", *job_ids, check=False)


def accounted(job_id: str) -> bool:
    """Accounting (slurmdbd) has recorded the job's end: sacct lags slurmctld by a moment."""
    record = run_sacct([job_id], 30.0, None, run_slurm).get(job_id)
    return record is not None and record.finished
