"""Submit a *.slurm drop-in with sbatch: its own #SBATCH lines decide its resources.

sbatch runs in the item's run-log folder, so a script without its own `--output` leaves
its slurm-<id>.out beside the run logs (and is pruned with them). A job submitted last
time that is still pending or running is not submitted again: an item never overlaps
itself, and a busy queue does not pile up copies.
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from watchdogs import ownfiles
from watchdogs.checks.context import TickContext
from watchdogs.procs import run_bounded
from watchdogs.result import CheckResult, Status
from watchdogs.slurmctl.jobspec import JobSpec
from watchdogs.slurmctl.runner import BUSY_MARKERS
from watchdogs.userregex import compile_user

SBATCH_TIMEOUT_S = 30.0
UNREACHABLE = (*BUSY_MARKERS, "Unable to contact slurm controller", "Connection refused")
ACTIVE_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING",
                 "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED", "STAGE_OUT", "SIGNALING")


# This user's jobs, whatever their name: what a *.slurm drop-in's previous job is among.
OWN_JOBS = JobSpec(job_regex=compile_user(".*"))


class OwnJobsWatcher:
    """Puts this user's jobs into the tick's one squeue snapshot (shared with the `job`
    checks), so asking "is the previous submission still queued?" costs no extra call."""

    def watched_jobs(self, ctx: TickContext) -> list[JobSpec]:
        return [OWN_JOBS]


def my_active_jobs(ctx: TickContext) -> dict[str, str]:
    """job id -> state of this user's jobs, from the tick's squeue snapshot. An array's
    tasks also answer to the array's own id (what sbatch printed)."""
    snapshot = ctx.job_snapshot(OWN_JOBS)
    jobs: dict[str, str] = {}
    for row in snapshot.matching(OWN_JOBS):
        if row.state in ACTIVE_STATES:
            jobs[row.raw_id] = row.state
            jobs.setdefault(row.array_job_id or row.raw_id, row.state)
    return jobs


def still_active(previous_job: str | None, active: Mapping[str, str]) -> CheckResult | None:
    """A WARNING when the previous submission is still queued or running, else None."""
    if previous_job and active.get(previous_job) in ACTIVE_STATES:
        return CheckResult(Status.WARNING, f"previous job {previous_job} still {active[previous_job]}; "
                           "not submitted again", context={"job": previous_job})
    return None


def submit(argv: Sequence[str], log_path: Path, env: Mapping[str, str]) -> tuple[CheckResult, str | None]:
    """sbatch the script (argv[0]) with its arguments. Returns (result, job id or None)."""
    ownfiles.make_dirs(log_path.parent)
    cmd = ["sbatch", "--parsable", *argv]
    # sbatch answers straight into the run's log, not into a pipe of ours: if this process
    # dies while sbatch waits on the controller, the job id it prints is not lost with us,
    # and the next run reads it there (`submitted_job`) instead of submitting a twin.
    with os.fdopen(ownfiles.create_private(log_path, append=True), "wb") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        start = out.tell()
        try:
            proc = run_bounded(cmd, SBATCH_TIMEOUT_S, cwd=log_path.parent, env=env,
                               stdout=out.fileno())  # group killed on timeout
        except FileNotFoundError:
            return _logged(log_path, CheckResult(Status.UNKNOWN, "sbatch: command not found")), None
        except subprocess.TimeoutExpired:
            return _logged(log_path, CheckResult(
                Status.UNKNOWN, f"sbatch did not answer within {SBATCH_TIMEOUT_S:g}s")), None
    with log_path.open("rb") as fh:
        fh.seek(start)
        said = fh.read(64 * 1024).decode(errors="replace")
    reply = (said + proc.stderr).strip()
    if proc.returncode == 0:
        job_id = said.strip().split(";")[0]
        result = CheckResult(Status.OK, f"submitted job {job_id}", context={"job": job_id})
        return _logged(log_path, result, proc.stderr), job_id
    message = (reply or "no output").splitlines()[-1]
    # The controller being away is not the script's fault: UNKNOWN. A rejected script is.
    status = Status.UNKNOWN if any(m in reply for m in UNREACHABLE) else Status.CRITICAL
    return _logged(log_path, CheckResult(status, f"sbatch failed: {message}"), proc.stderr), None


def submitted_job(log_path: Path) -> str | None:
    """The job id an sbatch wrote into a run's log (`submit`), also when the scheduler that
    started it died before it answered; None when there is none."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for before, line in zip(lines, lines[1:], strict=False):
        if before.startswith("$ sbatch --parsable"):
            job = line.strip().split(";")[0]
            return job if job.isdigit() else None
    return None


def _logged(log_path: Path, result: CheckResult, errors: str = "") -> CheckResult:
    # Never through a link planted at the log's name; 0600 whatever the umask.
    with os.fdopen(ownfiles.create_private(log_path, append=True), "w") as fh:
        fh.write(f"{errors.strip()}\n--- {result.status.name}: {result.summary}\n")
    return result
