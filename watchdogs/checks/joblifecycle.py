"""The `job` check's lifecycle notices: started, requeued and ended, told from two looks at
the queue and, for requeues that happened between two looks, from accounting's record of
the earlier runs (watchdogs.checks.jobnotices words them).

Also what a look remembers for the next one (`remember`). Loaded by JobCheck.run only:
`status` and `validate` need the check's option table, not this.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from watchdogs.checks import jobnotices
from watchdogs.checks.jobend import tick_answer
from watchdogs.checks.jobgone import final_ending
from watchdogs.errors import SlurmError
from watchdogs.slurmctl.jobstatus import RUNNING
from watchdogs.slurmctl.transitions import REQUEUED, Transition, transitions
from watchdogs.slurmctl.transitions import remember as remember_rows

if TYPE_CHECKING:
    from watchdogs.checks.context import TickContext
    from watchdogs.checks.job import JobCheck
    from watchdogs.result import Notice
    from watchdogs.slurmctl.jobstatus import Assessment
    from watchdogs.slurmctl.squeue import JobRow


def requeue_causes(check: JobCheck, ctx: TickContext, rows: list[JobRow]) -> dict[str, str]:
    """Alive job id -> the state accounting recorded for its run that ended since the last
    look (PREEMPTED, NODE_FAIL...), from the tick's one sacct; asked only by a check whose
    `notices` include requeued (it reads accounting anyway). {} when accounting cannot say."""
    if jobnotices.REQUEUED not in (check.opts.get("notices") or ()):
        return {}
    since = check.memory(ctx).get("looked_at")
    if since is None:
        return {}
    try:
        records = tick_answer(ctx).records
    except SlurmError:
        return {}
    out = {}
    for row in rows:
        record = records.get(row.raw_id)
        if record is None or not (row.running or row.queued):
            continue
        runs = [*zip(record.earlier, record.earlier_ends, strict=True), (record.state, record.end)]
        ended = [state for state, end in runs if end is not None and end.timestamp() >= int(since)
                 and state not in ("", "PENDING", "RUNNING", "REQUEUED")]
        if ended:
            out[row.raw_id] = ended[-1]
    return out


def lifecycle_notices(check: JobCheck, ctx: TickContext, rows: list[JobRow],
                      causes: Mapping[str, str] | None = None) -> list[Notice]:
    """The lifecycle notices the check asks for (started, requeued, ended) since its last
    look; an `ended` notice waits for accounting's final word (`pending_notices`).
    `causes`: `requeue_causes`, to word a requeue ("was preempted")."""
    wanted = check.opts.get("notices") or ()
    memory = check.memory(ctx)
    if not wanted or "seen" not in memory:
        return []  # the first look only learns what runs; nothing has changed yet
    found = transitions(memory["seen"], rows)
    if jobnotices.REQUEUED in wanted:
        found = [*requeued_between(check, ctx, rows, memory, found), *found]
    said, waiting = jobnotices.notices(
        wanted, found, ctx.now, check.label(), memory.get("pending_notices", {}),
        lambda job_id, row: final_ending(check, ctx, job_id, row), causes or {})
    memory = check.memory(ctx)
    memory["pending_notices"] = waiting
    check.keep_memory(ctx, memory)
    return said


def requeued_between(check: JobCheck, ctx: TickContext, rows: list[JobRow],
                     memory: Mapping[str, Any], found: list[Transition]) -> list[Transition]:
    """Requeues since the last look that this look cannot see (the run started and was
    requeued in between): accounting's record of an alive job has an earlier run that
    ended after the last look. One per job; none when the look already told it."""
    since = memory.get("looked_at")
    if since is None:
        return []
    try:
        records = tick_answer(ctx).records
    except SlurmError:
        return []
    seen = {t.job_id for t in found if t.kind == REQUEUED}
    # Accounting's times are whole seconds: an end in the second of the last look counts,
    # and the ends already told are remembered so that none is told twice.
    told: dict[str, list[float]] = dict(memory.get("requeues_told", {}))
    # A requeue this look saw (pending again) is told by the look; accounting may record
    # it only later: its end, at or before this moment, is not news then.
    until: dict[str, float] = dict(memory.get("requeues_seen_until", {}))
    until.update({job_id: ctx.now.timestamp() for job_id in seen})
    out = []
    for row in rows:
        record = records.get(row.raw_id)
        if not (row.running or row.queued) or record is None:
            continue
        # The job is alive: every earlier run accounting shows was requeued. Its newest
        # run counts only when accounting calls it REQUEUED (the record of the new run may
        # not be there yet); an end in any other state is this run ending (a cancel that
        # accounting records before squeue stops listing the job), not a requeue.
        newest = (record.end,) if record.state == "REQUEUED" else ()
        runs = (*record.earlier_ends, *newest)
        ends = [e.timestamp() for e in runs if e is not None]
        new = [e for e in ends if e >= int(since) and e not in told.get(row.raw_id, [])
               and e > until.get(row.raw_id, float("-inf"))]
        if new and row.raw_id not in seen:
            out.append(Transition(REQUEUED, row.raw_id, row))
        if new:
            told[row.raw_id] = [*told.get(row.raw_id, []), *new][-10:]
    alive = {r.raw_id for r in rows}
    fresh = check.memory(ctx)
    fresh["requeues_told"] = {k: v for k, v in told.items() if k in alive}
    fresh["requeues_seen_until"] = {k: v for k, v in until.items() if k in alive}
    check.keep_memory(ctx, fresh)
    return out


def remember(check: JobCheck, ctx: TickContext, verdict: Assessment, rows: list[JobRow]) -> None:
    """Last job ids seen alive (to ask how the last one ended), when one last ran, and
    each alive job's state (for the lifecycle transitions of the next look)."""
    memory = check.memory(ctx)
    alive = [r.raw_id for r in (*verdict.running, *verdict.queued)]
    if alive:
        memory["job_ids"] = alive[-20:]
    if verdict.kind == RUNNING:
        memory["last_running_at"] = ctx.now.timestamp()
    memory["looked_at"] = ctx.now.timestamp()
    memory["alive_last"] = bool(alive)
    if alive:
        memory["alive_at"] = ctx.now.timestamp()
    memory["seen"] = remember_rows(rows)
    check.keep_memory(ctx, memory)
