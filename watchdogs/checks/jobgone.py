"""A `job` check found its job gone: why, in words (from accounting when it answers, else
from what the controller still shows), the end of its log, and the optional resubmit.

JobCheck imports this module when a job is gone or has ended, not when the class is built
(`validate` and `status` build it for its option table only).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdogs.checks import jobend, jobfiles, recovery
from watchdogs.errors import SlurmError, WatchdogsError
from watchdogs.result import CheckResult, Notice, Status
from watchdogs.slurmctl import resubmit
from watchdogs.slurmctl.ending import COMPLETED, Ending, Progress
from watchdogs.slurmctl.snapshot import SLURM_TIMEOUT_S

if TYPE_CHECKING:
    from watchdogs.checks.context import TickContext
    from watchdogs.checks.job import JobCheck
    from watchdogs.slurmctl.jobspec import JobSpec
    from watchdogs.slurmctl.sacct import AcctRecord
    from watchdogs.slurmctl.squeue import JobRow

RESUBMITS = "check.job.resubmits"


def gone(check: JobCheck, ctx: TickContext, rows: list[JobRow]) -> CheckResult:
    """CRITICAL with how the last instance ended, or WARNING when it was resubmitted."""
    spec = check.spec
    memory = check.memory(ctx)
    runs = _runs_since(check, ctx)
    job_id = _newest([r.raw_id for r in runs[:1]], check.last_id(rows, memory))
    context = {"job_name": check.label(), "state": "GONE"}
    where = f"no job with {spec.describe()} is running or queued"
    if job_id is None:
        summary = f"gone: {where}, and there is no record of an earlier one"
        if check.opts.get("resubmit") is not None:
            context["resubmit"] = "no_evidence"
            summary += (". Not resubmitted: no accounting record shows that a run of it ended "
                        "(a resubmit needs one, so that a training is never started twice)")
        return CheckResult(Status.CRITICAL, summary, context=context, fingerprint="gone:")
    row = next((r for r in rows if r.raw_id == job_id), None)
    ending, tail, _final = _ending(check, ctx, job_id, row)
    f = ending.facts
    context.update(job=job_id, last_state=f.state or "unknown", ending=ending.kind)
    # The source is part of it: a degraded first word, then accounting's, is news.
    fingerprint = f"gone:{job_id}:{ending.kind}:{f.source}"
    details = [f"{where}.", f"efficiency: {ending.efficiency()}" if f.source == "sacct" else "",
               *recovery.lines(recovery.record_for(check, ctx), job_id)]
    details += _tail_lines(tail)
    summary = ending.sentence() + _earlier_runs(check, ctx, [r for r in runs if r.raw_id != job_id])
    lines = tuple(d for d in details if d)
    if ending.kind == COMPLETED:
        # A training that finished (exit 0: done, finish(), or trainguard's kill switch) is
        # news, not a failure: OK (it resolves an open alert) and a notice, told once.
        return _completed(check, ctx, job_id, summary, lines, context, fingerprint)
    if check.opts.get("resubmit") is None:
        return CheckResult(Status.CRITICAL, summary, lines, context=context, fingerprint=fingerprint)
    return _resubmit(check, ctx, summary, lines, context, ending, fingerprint, row)


def _completed(check: JobCheck, ctx: TickContext, job_id: str, summary: str,
               lines: tuple[str, ...], context: dict[str, str], fingerprint: str) -> CheckResult:
    memory = check.memory(ctx)
    told = memory.get("told_completed") == job_id
    if not told:
        memory["told_completed"] = job_id
        check.keep_memory(ctx, memory)
    notices = () if told else (Notice(summary, lines, "ended"),)
    return CheckResult(Status.OK, summary, lines, context=context, fingerprint=fingerprint,
                       notices=notices)


def _runs_since(check: JobCheck, ctx: TickContext) -> list[AcctRecord]:
    """Every finished run of the job since the last look, newest first, from the tick's one
    sacct ([] when accounting cannot say: the controller's view then decides, and says so)."""
    window = check.accounting_window(ctx)
    if window is None:
        return []
    spec = check.spec
    try:
        return jobend.runs_since(ctx, window, lambda r: _is_ours(spec, window, r))
    except SlurmError:
        return []


def _is_ours(spec: JobSpec, window: jobend.Window, record: AcctRecord) -> bool:
    if spec.job_name is not None and record.name != spec.job_name:
        return False
    if spec.job_regex is not None and not spec.job_regex.fullmatch(record.name):
        return False
    return window.users is None or record.user in window.users


def _newest(*candidates: Sequence[str] | str | None) -> str | None:
    """The most recent of the job ids (ids grow with time)."""
    ids = [c for group in candidates if group for c in ([group] if isinstance(group, str) else group)]
    return max(ids, key=lambda i: int(i.split("_")[0]) if i.split("_")[0].isdigit() else 0, default=None)


def _earlier_runs(check: JobCheck, ctx: TickContext, earlier: list[AcctRecord]) -> str:
    """"; and 1 earlier run since the last look: job 5 hit its time limit" (runs already
    reported are left out)."""
    memory = check.memory(ctx)
    told = memory.get("explained", {})
    earlier = [r for r in earlier if r.raw_id not in told]
    if not earlier:
        return ""
    shown = ", ".join(f"job {r.job_id} {_state_words(r.state)}" for r in earlier[:3])
    more = f" and {len(earlier) - 3} more" if len(earlier) > 3 else ""
    runs = "run" if len(earlier) == 1 else "runs"
    return f"; and {len(earlier)} earlier {runs} since the last look: {shown}{more}"


def _state_words(state: str) -> str:
    return {"TIMEOUT": "hit its time limit", "OUT_OF_MEMORY": "ran out of memory",
            "FAILED": "failed", "COMPLETED": "completed", "CANCELLED": "was cancelled",
            "NODE_FAIL": "lost its node", "PREEMPTED": "was preempted"}.get(state, f"ended {state}")


def final_ending(check: JobCheck, ctx: TickContext, job_id: str, row: JobRow | None
                 ) -> tuple[Ending, bool]:
    """How `job_id` ended, and whether that is final (for the `ended` notice)."""
    ending, _tail, final = _ending(check, ctx, job_id, row)
    return ending, final


def _ending(check: JobCheck, ctx: TickContext, job_id: str, row: JobRow | None
            ) -> tuple[Ending, dict[str, Any] | None, bool]:
    """How `job_id` ended (kept once accounting has it), its log tail, and whether the
    explanation is final (from accounting)."""
    memory = check.memory(ctx)
    kept = memory.get("explained", {}).get(job_id)
    if kept is not None:
        ending, tail = jobend.from_json(kept)
        return ending, tail, True
    facts = jobend.end_facts(ctx, job_id, row, check.label())
    progress = _progress(check.opts, job_id, facts.start) if facts.source else Progress()
    ending = jobend.explain_end(ctx, facts, progress)
    tail = _tail(check, ctx, job_id, ending)
    if facts.source == "sacct":
        memory = check.memory(ctx)
        memory["explained"] = jobend.keep(memory.get("explained", {}), job_id,
                                          jobend.to_json(ending, tail))
        check.keep_memory(ctx, memory)
    return ending, tail, facts.source == "sacct"


def _progress(opts: Mapping[str, Any], job_id: str, start: datetime | None) -> Progress:
    heartbeats, checkpoints = opts.get("heartbeats"), opts.get("checkpoints")
    if heartbeats is None and checkpoints is None:
        return Progress()
    return jobfiles.progress(heartbeats, checkpoints, job_id, opts["probe_timeout"],
                             start.timestamp() if start is not None else None)


def _tail(check: JobCheck, ctx: TickContext, job_id: str, ending: Ending) -> dict[str, Any] | None:
    opts = check.opts
    if opts["tail_lines"] <= 0 or ending.facts.source != "sacct":
        return None
    try:
        record = jobend.accounting(ctx, [job_id]).get(job_id)
    except SlurmError:
        record = None  # the ending came from the same answer: only a second call could fail
    seen = check.memory(ctx).get("outputs", {}).get(job_id)
    where = jobfiles.where_logs(opts, check.name, job_id, seen, record, opts["probe_timeout"])
    return jobfiles.job_log_tail(ending.facts, where, opts["tail_lines"], opts["probe_timeout"])


def _resubmit(check: JobCheck, ctx: TickContext, summary: str, details: tuple[str, ...],
              context: dict[str, str], ending: Ending, fingerprint: str, row: JobRow | None
              ) -> CheckResult:
    opts = check.opts
    script = opts["resubmit"]
    policy = resubmit.ResubmitPolicy(
        script, opts["resubmit_limit"], opts["resubmit_window"],
        opts.get("kill_switch") or script.parent / "NO_RESUBMIT",
        frozenset(opts["resubmit_on"]), opts["fail_fast"], opts.get("checkpoints") is not None)
    now = ctx.now.timestamp()
    history = ctx.store.kv_get(RESUBMITS, check.name, [])
    decision = resubmit.decide(policy, history, now, policy.kill_switch.exists(), ending,
                               max(history, default=None),
                               recovery.storm_reason(recovery.record_for(check, ctx), ending.facts.job_id))
    context["resubmit"] = decision.key
    if not decision.allowed:
        return CheckResult(Status.CRITICAL, f"{summary}. {decision.why}.", details, context=context,
                           fingerprint=fingerprint)
    doubt = _second_look(check, ctx)
    if doubt is not None:
        context["resubmit"] = "doubt"
        return CheckResult(Status.UNKNOWN, f"{summary}. Not resubmitted: {doubt}", details,
                           context=context, fingerprint=f"{fingerprint}:doubt")
    exclude, said = recovery.exclusion(check, ctx, decision.exclude, ending.facts.nnodes, row)
    node = (decision.exclude or ("",))[0]
    storm = recovery.would_storm(check, ctx, ending.facts.job_id, decision.key, node)
    if storm is not None:
        context["resubmit"] = "storm"
        return CheckResult(Status.CRITICAL, f"{summary}. Not resubmitted: it would be a restart storm "
                                            f"({storm[0]}); the chain ends here",
                           (*details, "the restarts, this resubmit last:", *storm[1]),
                           context=context, fingerprint=fingerprint)
    try:
        job_id = _submit(check, ctx, script, exclude)
    except SlurmError as exc:
        return CheckResult(Status.CRITICAL, f"{summary}. Resubmit failed: {exc}", details,
                           context=context, fingerprint=fingerprint)
    recovery.count_restart(check, ctx, ending.facts.job_id, decision.key, node, exclude)
    ctx.store.kv_put(RESUBMITS, check.name, [*decision.recent, now])
    context["resubmitted"] = job_id
    excluding = f" excluding {', '.join(exclude)}" if exclude else ""
    return CheckResult(Status.WARNING, f"{summary}. Resubmitted as job {job_id}{excluding} "
                                       f"({decision.why}).", (*details, said) if said else details,
                       context=context,
                       fingerprint=fingerprint)


def _second_look(check: JobCheck, ctx: TickContext) -> str | None:
    """Why not to submit, or None: a fresh, clean listing of the job's name and users shows
    no run of it alive. The one extra squeue of a tick that resubmits (rare by design): a
    second copy of a training costs far more than a call."""
    from watchdogs.slurmctl.jobspec import plan_queries
    from watchdogs.slurmctl.squeue import run_query
    from watchdogs.slurmctl.users import resolve_users

    spec = check.spec
    try:
        users = resolve_users(spec.users)
        rows = [row for query in plan_queries([spec], {spec.users: users})
                for row in run_query(query, SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner)]
    except WatchdogsError as exc:
        return (f"a second look at the queue before resubmitting failed ({exc}), so it "
                "cannot be told that no copy of it runs")
    alive = [r for r in rows if spec.matches(r, users) and not r.finished]
    if alive:
        listed = ", ".join(f"job {r.job_id} {r.state}" for r in alive[:3])
        return (f"a second look at the queue lists it again ({listed}); nothing was "
                "submitted, so that a training is never started twice")
    return None


def _submit(check: JobCheck, ctx: TickContext, script: Path, exclude: tuple[str, ...]) -> str:
    # The one side effect of the job check: sbatch the user's own script, as the user the
    # watchdog runs as, only after the decision above allowed it.
    return resubmit.submit(script, check.opts.get("job_name"), check.opts.get("cluster"),
                           SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner, exclude)


def _tail_lines(tail: Mapping[str, Any] | None) -> list[str]:
    if not tail:
        return []
    if tail.get("lines"):
        # What was cut is said at the top (notifiers.wording reads the path back from it).
        older = f" ({tail['older']})" if tail.get("older") else ""
        return [f"last lines of {tail['path']}{older}:", *tail["lines"]]
    return [f"no log lines: {tail['problem']}"] if tail.get("problem") else []
