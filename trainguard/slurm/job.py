"""What the training needs to know from SLURM: the job's environment, its EndTime and
state from the controller, KillWait, and the one requeue call; and the job, told in one
line at start.

Every Slurm command is an argument list with a timeout (trainguard.slurm.run), so a
stopped controller is an error the caller handles, never a hang of the training loop.
"""
from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainguard.errors import SlurmError
from trainguard.slurm.run import run_slurm

if TYPE_CHECKING:
    from trainguard.checkpoints.checkpoint import Checkpoint

log = logging.getLogger("trainguard")

QUERY_TIMEOUT_S = 10.0
DEFAULT_KILL_WAIT_S = 30.0  # Slurm's default KillWait
_FIELD = re.compile(r"(?:^|\s)([A-Za-z/:]+)=(\S*)")


@dataclass(frozen=True)
class JobEnv:
    """The job as its environment describes it (no controller call)."""

    job_id: str = ""
    array_job_id: str = ""
    array_task_id: str = ""
    restart_count: int = 0
    nodelist: str = ""
    ntasks: str = ""
    procid: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> JobEnv:
        e = os.environ if env is None else env
        procid = e.get("RANK", e.get("SLURM_PROCID"))   # torchrun's RANK first: the global rank
        return cls(e.get("SLURM_JOB_ID", ""), e.get("SLURM_ARRAY_JOB_ID", ""),
                   e.get("SLURM_ARRAY_TASK_ID", ""), int(e.get("SLURM_RESTART_COUNT", "0") or 0),
                   e.get("SLURM_JOB_NODELIST", e.get("SLURM_NODELIST", "")),
                   e.get("SLURM_NTASKS", ""), int(procid) if procid not in (None, "") else None)

    @property
    def chain_id(self) -> str:
        """What stays the same across requeues and across the tasks of an array chain."""
        return self.array_job_id or self.job_id

    @property
    def label(self) -> str:
        if self.array_job_id:
            return f"{self.job_id} (array {self.array_job_id}_{self.array_task_id})"
        return self.job_id


@dataclass(frozen=True)
class JobTimes:
    """The controller's view of the job at `read_at` (wall clock)."""

    state: str
    end_time: float | None     # Unix time; None when Unknown
    time_limit: float | None   # seconds; None when UNLIMITED
    read_at: float

    @property
    def being_cancelled(self) -> bool:
        # A plain scancel shows COMPLETING/CANCELLED while the steps still run their
        # SIGTERM handlers; a preempted job with GraceTime is still RUNNING.
        return self.state.split("+")[0] in ("CANCELLED", "COMPLETING", "COMPLETED", "FAILED")


def parse_fields(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _FIELD.finditer(text)}


def parse_slurm_time(value: str) -> float | None:
    """"2026-11-22T02:56:09" (the controller's local time) -> Unix time."""
    if not value or value in ("Unknown", "None", "N/A"):
        return None
    try:
        return time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def parse_time_limit(value: str) -> float | None:
    """Slurm's formats -> seconds: "5" (min), "mm:ss", "hh:mm:ss", "d-hh", "d-hh:mm", "d-hh:mm:ss"."""
    if not value or value in ("UNLIMITED", "Partition_Limit", "NONE", "N/A"):
        return None
    days, _, rest = value.rpartition("-")
    try:
        parts = [int(p) for p in rest.split(":")]
        day_seconds = int(days) * 86400 if days else 0
    except ValueError:
        return None
    if len(parts) > 3:
        return None
    # With days: d-hh, d-hh:mm, d-hh:mm:ss. Without: mm, mm:ss, hh:mm:ss.
    units = (3600, 60, 1) if days else {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}[len(parts)]
    # Not strict: "d-hh" has fewer parts than units.
    return float(day_seconds + sum(p * u for p, u in zip(parts, units, strict=False)))


def parse_job(text: str, read_at: float) -> JobTimes:
    fields = parse_fields(text)
    if "JobState" not in fields:
        raise SlurmError(f"scontrol show job: no JobState in {text[:200]!r}")
    return JobTimes(fields["JobState"], parse_slurm_time(fields.get("EndTime", "")),
                    parse_time_limit(fields.get("TimeLimit", "")), read_at)


def query_job(job_id: str, wall: float | None = None, timeout: float = QUERY_TIMEOUT_S) -> JobTimes:
    """One `scontrol show job -o ID`. Raises SlurmError (never hangs past `timeout`)."""
    reply = run_slurm(["scontrol", "show", "job", "-o", job_id], timeout=timeout)
    return parse_job(reply.stdout, time.time() if wall is None else wall)


def query_kill_wait(timeout: float = QUERY_TIMEOUT_S) -> float:
    """KillWait: how long a plain scancel leaves between SIGTERM and SIGKILL."""
    try:
        reply = run_slurm(["scontrol", "show", "config"], timeout=timeout)
    except SlurmError:
        return DEFAULT_KILL_WAIT_S
    m = re.search(r"^KillWait\s*=\s*(\d+)", reply.stdout, re.MULTILINE)
    return float(m.group(1)) if m else DEFAULT_KILL_WAIT_S


def format_epoch(value: float | None) -> str:
    if value is None:
        return "unknown"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(value))


def format_seconds(value: float | None) -> str:
    if value is None:
        return "unlimited"
    total = int(value)
    days, rest = divmod(total, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def log_job_line(job: JobEnv, first: JobTimes | None, end_time: float | None,
                 resumed: Checkpoint | None, world: int) -> None:
    """One line: job id, array task, restart count, nodes, time limit, EndTime, resume.
    `first`: the controller's first answer; `end_time`: EndTime as known now."""
    resumed_from = (f"resumed from step {resumed.step} ({resumed.path})" if resumed
                    else "starting fresh (no checkpoint)")
    log.info("trainguard: job %s, restart %d, nodes %s, %d rank(s), time limit %s, EndTime %s, %s",
             job.label or "(not in SLURM)", job.restart_count, job.nodelist or "-", world,
             format_seconds(first.time_limit) if first else "unknown",
             format_epoch(end_time), resumed_from)
    restart = inplace_restart(os.environ)
    if restart:
        # Slurm's restart count does not move for a new step in the same job: this is ours.
        log.warning("trainguard: in-place restart %d of job %s (a new job step on %s, no requeue), %s",
                    restart, job.label, os.environ.get("SLURM_STEP_NODELIST") or job.nodelist or "-",
                    resumed_from)


def inplace_restart(env: Mapping[str, str]) -> int:
    """TRAINGUARD_INPLACE_RESTART, set by the templates for each new step (0: the first)."""
    value = env.get("TRAINGUARD_INPLACE_RESTART", "0")
    return int(value) if value.isdigit() else 0
