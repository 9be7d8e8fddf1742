"""Why a job waits, in words a person understands, and whether someone must act.

Benign reasons (the scheduler will get to it) are OK; reasons that need a person are
WARNING (it may clear by itself or by a routine action) or CRITICAL (it never starts
without someone changing something). An unknown reason is a WARNING showing Slurm's text.
"""
from __future__ import annotations

import re
from datetime import datetime

from watchdogs.humanize import duration as format_duration
from watchdogs.result import Status
from watchdogs.slurmctl.slurmtime import format_clock
from watchdogs.slurmctl.squeue import JobRow

BENIGN = {
    "None": "waiting to be scheduled",
    "Priority": "waiting for higher-priority jobs to start first",
    "Resources": "waiting for free resources",
    "Dependency": "waiting on the previous job of its dependency chain",
    "BeginTime": "waiting for its begin time",
    "JobArrayTaskLimit": "waiting on the array's task limit",
    "Prolog": "running its prolog",
    "Reservation": "waiting for its reservation to start",
    "Licenses": "waiting for licenses",
    "Cleaning": "waiting while a previous run is cleaned up",
    "Configuring": "waiting for its nodes to boot",
    "PowerUpNode": "waiting for its nodes to power up",
    "NodeDown": "waiting: a node it needs is down",
}
WARNING = {
    "JobHeldUser": "held by its user (release with `scontrol release {id}`)",
    "JobHeldAdmin": "held by an administrator",
    "ReqNodeNotAvail": "waiting for requested nodes that are not available",
    "PartitionDown": "its partition is down",
    "PartitionInactive": "its partition is inactive",
    "FrontEndDown": "no front-end node is available",
}
CRITICAL = {
    "DependencyNeverSatisfied": "will never start: a job it depends on failed",
    "launch failed requeued held": "launch failed, requeued and held (a node problem; "
                                   "`scontrol release {id}` after checking)",
    "BadConstraints": "will never start: its constraints cannot be satisfied",
    "InvalidAccount": "will never start: invalid account",
    "InvalidQOS": "will never start: invalid QOS",
    "QOSNotAllowed": "will never start: QOS not allowed",
    "AccountNotAllowed": "will never start: account not allowed",
    "PartitionConfig": "will never start: requests more than its partition allows",
    "PartitionNodeLimit": "will never start: more nodes than its partition allows",
    "PartitionTimeLimit": "will never start: a time limit above its partition's",
}
# Group (Grp*) and running-job limits clear when other jobs finish; per-job (Max*PerJob,
# MaxWall) limits never clear for this job.
_LIMIT = re.compile(r"(Assoc|QOS)\w*Limit")
_NEVER_LIMIT = re.compile(r"(Assoc|QOS)Max\w*PerJob\w*Limit|(Assoc|QOS)MaxWall\w*Limit")
# Slurm's "no estimate" is about a year ahead; nothing that far is a real forecast.
_NO_ESTIMATE_AFTER_S = 300 * 86400


def classify(reason: str) -> tuple[Status, str]:
    """(status, phrase with {id} to fill) for a pending reason as squeue prints it."""
    key = reason.split(",")[0].strip()
    for table, status in ((BENIGN, Status.OK), (WARNING, Status.WARNING), (CRITICAL, Status.CRITICAL)):
        if reason in table:
            return status, table[reason]
        if key in table:
            return status, table[key]
    if _NEVER_LIMIT.fullmatch(key):
        return Status.CRITICAL, f"will never start: over a per-job limit ({key})"
    if _LIMIT.fullmatch(key):
        return Status.WARNING, f"waiting on an account/QOS limit ({key})"
    return Status.WARNING, f"pending for a reason that needs a look: {reason}"


def describe_pending(row: JobRow, now: datetime) -> tuple[Status, str]:
    """"train (job 88_[10%1]): waiting on the array's task limit (1 at a time)"."""
    status, phrase = classify(row.reason)
    text = f"{job_words(row)}: " + phrase.format(id=row.raw_id)
    if row.reason == "Dependency" and row.dependency:
        text += f" ({row.dependency})"
    if row.reason == "JobArrayTaskLimit" and row.array_task and "%" in row.array_task:
        text += f" ({row.array_task.rsplit('%', 1)[1]} at a time)"
    if status is not Status.OK and row.reason not in phrase:
        text += f" [{row.reason}]"  # Slurm's own code, for the person who looks it up
    return status, text + _estimate(row, now)


def job_words(row: JobRow) -> str:
    """The job as every message names it (docs/alert-style.md): "train (job 88)"."""
    return f"{row.name} (job {row.job_id})" if row.name else f"job {row.job_id}"


def _estimate(row: JobRow, now: datetime) -> str:
    if row.start is None:
        return ""
    ahead = (row.start - now).total_seconds()
    if ahead <= 0 or ahead > _NO_ESTIMATE_AFTER_S:
        return ""
    return f"; scheduled to start in {format_duration(ahead)} at {format_clock(row.start, now)}"
