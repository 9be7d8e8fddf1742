"""Job lifecycle transitions between two looks at the queue: started, requeued, ended.

A pure function of what the last look remembered (job id -> state and start time) and the
rows of this look. A requeue is seen either as running -> queued, or as running with a new
start time (requeued and restarted between two looks).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Annotations only: the notice kinds below are in the `job` check's option table,
    # which `validate` and `status` build without reading the queue.
    from watchdogs.slurmctl.squeue import JobRow

STARTED, REQUEUED, ENDED = "started", "requeued", "ended"


@dataclass(frozen=True)
class Transition:
    kind: str
    job_id: str
    row: JobRow | None
    """This look's row (None when the job has left the queue)."""
    ran_for: float = 0.0
    """For a requeue: how long the run that was requeued had run, when known."""


def remember(rows: Sequence[JobRow]) -> dict[str, dict[str, Any]]:
    """What the next look compares with: alive jobs, their state and start. A COMPLETING
    job is ending or being requeued (Slurm even moves its start time meanwhile)."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.running or row.queued:
            state = ("completing" if row.state == "COMPLETING" else
                     "running" if row.running else "queued")
            seen[row.raw_id] = {"state": state, "elapsed": row.elapsed,
                                "start": row.start.timestamp() if state == "running" and row.start
                                else None}
    return seen


def transitions(previous: Mapping[str, Mapping[str, Any]], rows: Sequence[JobRow]) -> list[Transition]:
    by_id = {r.raw_id: r for r in rows}
    found: list[Transition] = []
    for row in rows:
        before = previous.get(row.raw_id) or {}
        was = before.get("state")
        ran_for = float(before.get("elapsed") or 0)
        if row.state == "COMPLETING":
            continue  # says nothing yet: the next look shows whether it ends or runs again
        if row.running:
            start = row.start.timestamp() if row.start else None
            restarted = was == "completing" or (
                was == "running" and start is not None and before.get("start") not in (None, start))
            if restarted:
                found.append(Transition(REQUEUED, row.raw_id, row, ran_for))
            if was not in ("running", "completing") or restarted:
                found.append(Transition(STARTED, row.raw_id, row))
        elif row.queued and was in ("running", "completing"):
            found.append(Transition(REQUEUED, row.raw_id, row, ran_for))
    for job_id in previous:
        gone = by_id.get(job_id)
        if gone is None or gone.finished:
            found.append(Transition(ENDED, job_id, gone))
    return found
