"""The training's story, told apart for the status page: consecutive looks of a `job` check
(its typed `JobLook`) become queued, running, requeued, preempted, paused and ended events,
and a `nodes` check's look becomes its drained/down counts. Written in the transaction that
records the run (watchdogs.scheduler.records), read by watchdogs.report.

A pure function (`events_between`) decides; `record` only reads the last look and writes.
"""
from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from watchdogs.result import JobLook, NodesLook
from watchdogs.state import history

if TYPE_CHECKING:
    from watchdogs.result import CheckResult

REQUEUED = "requeued"
PREEMPTED = "preempted"
"""A requeue whose reason names preemption (Slurm's pending reason or end state)."""


def _kind_of_requeue(reason: str, cause: str = "") -> str:
    """`cause`: accounting's state of the requeued run (JobLook.requeue_cause)."""
    return PREEMPTED if cause == "PREEMPTED" or "preempt" in reason.lower() else REQUEUED


def _cause_text(cause: str, job_id: str | None, fallback: str) -> str:
    if cause == "PREEMPTED":
        return f"preempted (job {job_id})"
    return f"{fallback}; its run ended {cause}" if cause else fallback


def events_between(item: str, t: float, before: JobLook | None, now: JobLook,
                   told_requeue: str | None = None) -> list[history.Event]:
    """What happened between two looks. `told_requeue`: the check's own requeue notice (a run
    that started and was requeued between two looks, found in accounting)."""
    out: list[history.Event] = []
    same = before is not None and before.job_id == now.job_id
    was = before.phase if before is not None else None

    def add(kind: str, cause: str = "") -> None:
        out.append(history.Event(item, t, kind, now.job_id, cause))

    if now.phase == "running":
        restarted = (same and was == "running" and before is not None and before.start is not None
                     and now.start is not None and before.start != now.start)
        cause = now.requeue_cause
        if restarted:
            add(_kind_of_requeue("", cause),
                _cause_text(cause, now.job_id, "requeued and started again between two looks"))
        elif told_requeue and was == "running":
            add(_kind_of_requeue(told_requeue, cause), _cause_text(cause, now.job_id, told_requeue))
        if was != "running" or restarted or (told_requeue and was == "running"):
            add("running")
    elif now.phase == "queued":
        if same and was == "running":
            waits = now.reason not in ("", "None")
            again = f"waiting again ({now.reason})" if waits else "waiting again"
            cause = now.requeue_cause
            add(_kind_of_requeue(now.reason, cause), _cause_text(cause, now.job_id, again))
        elif was != "queued":
            add("queued", now.reason)
    elif now.phase == "gone":
        if was not in ("gone", None) or (was is None and now.job_id):
            add("ended", now.reason)
    elif now.phase != was:
        add(now.phase, now.reason)
    return out


def record(db: sqlite3.Connection, item: str, t: float, result: CheckResult) -> None:
    look = result.look
    if isinstance(look, JobLook):
        told = next((n.summary for n in result.notices if n.kind == REQUEUED), None)
        history.add_events(db, events_between(item, t, history.last_look(db, item), look, told))
        history.keep_look(db, item, look)
    elif isinstance(look, NodesLook):
        drained = sum(1 for n in look.bad if "drain" in n.state)
        history.add_node_count(db, item, history.NodeCount(t, drained, len(look.bad) - drained, look.total),
                               [(n.name, n.state, n.reason) for n in look.bad])
