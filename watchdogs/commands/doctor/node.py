"""`watchdogs doctor --on-node`: run the doctor where the scheduler runs, in a small Slurm
job, and bring its answer back.

The job script is a constant (no name or path is written into it): sbatch reads it from
stdin, and what varies travels in the environment (WATCHDOGS_CONFIG, WATCHDOGS_PYTHON).
The job prints the doctor's JSON document on stdout into a file in the state folder (which
the nodes share with the login node), and the login node reads it once the job is gone.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdogs import ownfiles
from watchdogs.commands.doctor.checks import Finding
from watchdogs.errors import SlurmError
from watchdogs.result import Status
from watchdogs.slurmctl.runner import SlurmRunner

JOB_NAME = "watchdogs-doctor"
SCRIPT = """#!/bin/sh
# watchdogs doctor --on-node: the doctor's checks and a test message through every channel,
# run where the scheduler job runs. The JSON answer goes to stdout (the job's output file).
"$WATCHDOGS_PYTHON" -m watchdogs doctor --send --json
code=$?
# 0-3 are the doctor's verdicts, all written to the output file: the job itself went well
# (sacct shows COMPLETED, not a FAILED job for a channel that is down).
if [ "$code" -le 3 ]; then exit 0; fi
exit "$code"
"""
POLL_S = 1.0


@dataclass(frozen=True)
class NodeAnswer:
    job: str
    host: str
    findings: tuple[Finding, ...]
    data: Mapping[str, Any]


def submit(config_path: Path, folder: Path, runner: SlurmRunner, env: Mapping[str, str]) -> str:
    """sbatch the doctor job (a side effect on the cluster); its id."""
    ownfiles.make_dirs(folder)
    job_env = {k: v for k, v in env.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    job_env |= {"WATCHDOGS_CONFIG": str(config_path), "WATCHDOGS_PYTHON": sys.executable}
    # --time: a doctor that hangs must not hold a node; sbatch's other defaults (partition,
    # account) come from SBATCH_* in the environment, as for the scheduler job.
    argv = ["sbatch", "--parsable", f"--job-name={JOB_NAME}", "--time=10", "--ntasks=1",
            f"--output={folder}/doctor-%j.json", f"--error={folder}/doctor-%j.err"]
    reply = runner(argv, env=job_env, input_text=SCRIPT)
    return reply.stdout.strip().split(";")[0]


def job_state(job: str, runner: SlurmRunner) -> tuple[str, str] | None:
    """(state, reason) while the job is known to squeue; None once it has left."""
    try:
        out = runner(["squeue", "-h", "-j", job, "-o", "%T|%r"], timeout=30).stdout.strip()
    except SlurmError as exc:
        if "invalid job id" in str(exc).lower():
            return None
        raise
    if not out:
        return None
    state, _, reason = out.splitlines()[0].partition("|")
    return state, reason


def wait(job: str, budget: float, runner: SlurmRunner) -> tuple[str, str] | None:
    """Until the job has left the queue (None) or `budget` seconds passed (its last state)."""
    deadline = time.monotonic() + budget
    last = job_state(job, runner)
    while last is not None and last[0] not in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
        if time.monotonic() >= deadline:
            return last
        time.sleep(POLL_S)
        last = job_state(job, runner)
    return None


def read_answer(job: str, folder: Path) -> NodeAnswer | Finding:
    out, err = folder / f"doctor-{job}.json", folder / f"doctor-{job}.err"
    try:
        data = json.loads(out.read_text())
        findings = tuple(Finding.from_dict(f) for f in data["findings"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        try:
            said = " ".join(err.read_text(errors="replace").split()[-60:])
        except OSError:
            said = ""
        return Finding("node job", Status.CRITICAL,
                       f"job {job} left no answer in {out} ({type(exc).__name__}): "
                       f"{said or 'no error output'}",
                       "the watchdog's Python must be importable on the compute nodes "
                       f"({sys.executable}) and {folder} shared with them")
    return NodeAnswer(job, str(data.get("host", "?")), findings, data)


def on_node(config_path: Path, state_dir: Path, budget: float, runner: SlurmRunner,
            env: Mapping[str, str] | None = None) -> NodeAnswer | Finding:
    folder = state_dir / "doctor"
    try:
        job = submit(config_path, folder, runner, os.environ if env is None else env)
    except (SlurmError, OSError) as exc:
        return Finding("node job", Status.CRITICAL, f"cannot submit the doctor job: {exc}",
                       "sbatch must work from here; set SBATCH_PARTITION/SBATCH_ACCOUNT if the "
                       "site needs them")
    try:
        still = wait(job, budget, runner)
    except SlurmError as exc:
        return Finding("node job", Status.UNKNOWN, f"job {job}: squeue does not answer: {exc}",
                       f"look at {folder}/doctor-{job}.json later")
    if still is not None:
        try:
            runner(["scancel", job])
            ended = "cancelled"
        except SlurmError as exc:
            ended = f"NOT cancelled ({exc}): scancel {job} yourself"
        return Finding("node job", Status.UNKNOWN, f"job {job} still {still[0]} ({still[1]}) after "
                       f"{budget:g}s: {ended}", "run it when a node is free, or raise --wait; "
                       "SBATCH_PARTITION picks a partition with idle nodes")
    return read_answer(job, folder)
