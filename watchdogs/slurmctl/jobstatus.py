"""From the rows that match a `job` check to a verdict: a pure function of rows and time."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from watchdogs.humanize import duration as format_duration
from watchdogs.result import Metric, Status, worst
from watchdogs.slurmctl.reasons import describe_pending, job_words
from watchdogs.slurmctl.slurmtime import format_clock
from watchdogs.slurmctl.squeue import PAUSED_STATES, JobRow

RUNNING, QUEUED, PAUSED, GONE, UNKNOWN = "running", "queued", "paused", "gone", "unknown"


@dataclass(frozen=True)
class Assessment:
    kind: str
    """running, queued, paused, gone, or unknown (Slurm could not be asked)."""
    status: Status
    summary: str
    details: tuple[str, ...] = ()
    metrics: tuple[Metric, ...] = ()
    context: dict[str, str] = field(default_factory=dict)
    running: tuple[JobRow, ...] = ()
    queued: tuple[JobRow, ...] = ()
    fingerprint: str = ""


def assess(rows: Sequence[JobRow], now: datetime, last_running_at: float | None = None,
           max_pending: float | None = None) -> Assessment:
    running = tuple(sorted((r for r in rows if r.running), key=lambda r: -r.elapsed))
    queued = tuple(r for r in rows if r.queued)
    if running:
        return _running(running, queued, now)
    if queued:
        return _queued(queued, now, last_running_at, max_pending)
    paused = tuple(r for r in rows if r.state in PAUSED_STATES)
    if paused:
        row = paused[0]
        return Assessment(PAUSED, Status.WARNING, f"{row.state.lower()}: {job_words(row)}",
                          context=_context(row), fingerprint=f"paused:{row.raw_id}")
    return Assessment(GONE, Status.CRITICAL, "neither running nor queued")


def _running(running: tuple[JobRow, ...], queued: tuple[JobRow, ...], now: datetime) -> Assessment:
    row = running[0]
    since = f" (since {format_clock(row.start, now)})" if row.start else ""
    summary = (f"running: {job_words(row)} on {row.nodelist or '?'} "
               f"for {format_duration(row.elapsed)}{since}")
    if len(running) > 1:
        summary += f"; {len(running) - 1} more running"
    if queued:
        summary += f"; queued: {', '.join(r.job_id for r in queued[:3])}" + (
            "..." if len(queued) > 3 else "")
    details = tuple(f"{job_words(r)} running on {r.nodelist} for "
                    f"{format_duration(r.elapsed)}" for r in running[1:])
    details += tuple(describe_pending(r, now)[1] for r in queued)
    metrics = (Metric("running", len(running)), Metric("queued", len(queued)),
               Metric("elapsed", row.elapsed, "s"))
    return Assessment(RUNNING, Status.OK, summary, details, metrics, _context(row), running, queued,
                      "running")


def _queued(queued: tuple[JobRow, ...], now: datetime, last_running_at: float | None,
            max_pending: float | None) -> Assessment:
    judged = [(describe_pending(r, now), r) for r in queued]
    status = worst([s for (s, _), _ in judged])
    (_, text), row = next(((st, t), r) for (st, t), r in judged if st is status)
    waited = _waited(queued, now, last_running_at)
    summary = f"queued: {text}"
    if waited is not None:
        summary += f"; waiting {format_duration(waited)}"
        if max_pending is not None and waited > max_pending:
            status = worst([status, Status.WARNING])
            summary += f" (over max_pending {format_duration(max_pending)})"
    details = tuple(t for (_, t), r in judged if r is not row)
    metrics = (Metric("running", 0), Metric("queued", len(queued)),
               Metric("pending_for", waited or 0, "s"))
    return Assessment(QUEUED, status, summary, details, metrics, _context(row), (), queued,
                      f"queued:{row.reason}")


def _waited(queued: Sequence[JobRow], now: datetime, last_running_at: float | None) -> float | None:
    """Since the first queued instance was submitted, or since one was last seen running
    (a chain's next job has only waited since its predecessor stopped)."""
    submits = [r.submit.timestamp() for r in queued if r.submit is not None]
    if not submits:
        return None
    since = max(min(submits), last_running_at or 0.0)
    return max(0.0, now.timestamp() - since)


def unknown(summary: str) -> Assessment:
    """No verdict: Slurm could not be asked (never taken for "gone")."""
    return Assessment(UNKNOWN, Status.UNKNOWN, summary)


def _context(row: JobRow) -> dict[str, str]:
    context = {"job": row.job_id, "job_name": row.name, "state": row.state,
               "partition": row.partition, "user": row.user}
    if row.cluster:
        context["cluster"] = row.cluster
    return context
