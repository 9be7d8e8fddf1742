"""How the jobs of a tick's `job` checks ended: ONE `sacct` call per tick for every job
check that needs it, shared like the squeue snapshot, and what each check makes of it.

Each `job` check declares, before anyone asks, the job IDs it needs explained
(`ended_job_ids`): jobs it saw alive last time that are gone now, and the last instance of
a job that is gone. The first check to ask runs one `sacct -j <all of them>`; the others
reuse the answer (a failure too, so a dead slurmdbd is asked once). An ending explained
from accounting is final and kept in the state store, so a job that stays gone costs no
further sacct calls. Where accounting is off, unreachable, slow or has not recorded the end
yet, the explanation degrades to what the controller's rows say, and says so.
"""
from __future__ import annotations

import pwd
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from watchdogs.checks.context import TickContext
from watchdogs.errors import SlurmError
from watchdogs.slurmctl.backoff import guarded
from watchdogs.slurmctl.ending import EndFacts, Ending, Progress, classify, explain
from watchdogs.slurmctl.hostlist import expand
from watchdogs.slurmctl.sacct import (
    AcctRecord,
    helpformat_argv,
    offered,
    run_sacct,
    run_sacct_window,
)
from watchdogs.slurmctl.sinfo import run_sinfo
from watchdogs.slurmctl.snapshot import SLURM_TIMEOUT_S
from watchdogs.slurmctl.squeue import JobRow

# sacct is asked for at most this long: a slow slurmdbd degrades the words, never the tick.
SACCT_TIMEOUT_S = 15.0
KEEP_EXPLAINED = 10
# Which optional fields (StdOut, StdErr, SubmitLine) this release's sacct offers: asked with
# `sacct --helpformat` once a day (an hour after a failure), kept in the state store, so the
# tick's one sacct asks only for fields that exist.
FIELDS_MEMORY = "slurm.sacct.fields"
FIELDS_RECHECK_S = 86400.0
FIELDS_RETRY_S = 3600.0


@dataclass(frozen=True)
class AcctAnswer:
    asked: frozenset[str]
    records: Mapping[str, AcctRecord]
    windows: tuple[Window, ...] = ()


def needed_ids(ctx: TickContext) -> list[str]:
    """Every job ID the tick's checks want explained, in one list."""
    return ctx.wanted_ids("ended_job_ids", (*ctx.checks, *ctx.watchers))


@dataclass(frozen=True)
class Window:
    """A gone job's check asks for every run of its job since it last looked."""

    since: float
    names: tuple[str, ...] | None
    """Exact names, or None (a regex: no name filter)."""
    users: frozenset[str] | None


def needed_windows(ctx: TickContext) -> list[Window]:
    found = []
    for check in ctx.checks:
        wanted = getattr(check, "accounting_window", None)
        if wanted is None:
            continue
        try:
            window = wanted(ctx)
        except Exception:  # noqa: BLE001 - that check reports its own problem when it runs
            continue
        if window is not None:
            found.append(window)
    return found


def sacct_extra(ctx: TickContext) -> tuple[str, ...]:
    """The optional fields to ask this release's sacct for (see FIELDS_MEMORY)."""
    return ctx.shared("sacct-fields", lambda: _offered(ctx))


def _offered(ctx: TickContext) -> tuple[str, ...]:
    now = ctx.now.timestamp()
    kept = ctx.store.kv_get(FIELDS_MEMORY, "offered", {})
    if kept and 0 <= now - float(kept.get("at", 0)) < float(kept.get("for", FIELDS_RECHECK_S)):
        return tuple(kept.get("fields", ()))
    try:
        reply = ctx.runner(helpformat_argv(), timeout=SACCT_TIMEOUT_S, env=ctx.slurm_env())
    except SlurmError:
        # The tick's sacct will say what is wrong; the base fields serve meanwhile.
        ctx.store.kv_put(FIELDS_MEMORY, "offered", {"at": now, "for": FIELDS_RETRY_S, "fields": []})
        return ()
    fields = offered(reply.stdout)
    ctx.store.kv_put(FIELDS_MEMORY, "offered", {"at": now, "for": FIELDS_RECHECK_S, "fields": list(fields)})
    return fields


def _fetch(ctx: TickContext, ids: Sequence[str], windows: Sequence[Window] = ()) -> AcctAnswer:
    """One sacct: by time window when a check needs one (its job is gone, or it asks how jobs
    it saw alive ended: each check's window covers its ids), else by job ids."""
    if not ids and not windows:
        return AcctAnswer(frozenset(), {})
    extra = sacct_extra(ctx)
    if not windows:
        records = guarded(ctx.store, "sacct", ctx.now.timestamp(),
                          lambda: run_sacct(ids, SACCT_TIMEOUT_S, ctx.slurm_env(), ctx.runner, extra))
        return AcctAnswer(frozenset(ids), records)
    since = datetime.fromtimestamp(min(w.since for w in windows)).astimezone()
    names = None if any(w.names is None for w in windows) else {n for w in windows for n in w.names or ()}
    users = None if any(w.users is None for w in windows) else {u for w in windows for u in w.users or ()}
    records = guarded(ctx.store, "sacct", ctx.now.timestamp(),
                      lambda: run_sacct_window(since, names, users, SACCT_TIMEOUT_S,
                                               ctx.slurm_env(), ctx.runner, extra))
    return AcctAnswer(frozenset(ids) | frozenset(records), records, tuple(windows))


def tick_answer(ctx: TickContext) -> AcctAnswer:
    """The tick's one sacct answer (raises SlurmError when sacct fails)."""
    return ctx.shared("sacct", lambda: _fetch(ctx, needed_ids(ctx), needed_windows(ctx)))


def runs_since(ctx: TickContext, window: Window, match: Callable[[AcctRecord], bool]
               ) -> list[AcctRecord]:
    """The finished runs in the tick's answer that `match`, newest first."""
    answer = tick_answer(ctx)
    seen: dict[str, AcctRecord] = {}
    for record in answer.records.values():
        if record.finished and match(record) and record.end is not None \
                and record.end.timestamp() >= window.since:
            seen[record.raw_id] = record
    return sorted(seen.values(), key=lambda r: (r.end.timestamp() if r.end else 0.0, _num(r.raw_id)),
                  reverse=True)


def _num(job_id: str) -> int:
    head = job_id.split("_")[0]
    return int(head) if head.isdigit() else 0


def accounting(ctx: TickContext, ids: Sequence[str]) -> Mapping[str, AcctRecord]:
    """The tick's one batched answer when it covers `ids`; else (a check run outside its
    tick's list) one call of its own, still memoised. Raises SlurmError when sacct fails."""
    if not ids:
        return {}
    answer = tick_answer(ctx)
    if set(ids) <= answer.asked:
        return answer.records
    return ctx.shared(f"sacct:{','.join(sorted(ids))}", lambda: _fetch(ctx, ids)).records


def bad_nodes(ctx: TickContext) -> dict[str, str]:
    """Nodes down or drained now, with their reason (the tick's one sinfo, shared with the
    `nodes` checks); {} when sinfo cannot be asked."""
    try:
        rows = ctx.shared("sinfo", lambda: guarded(
            ctx.store, "sinfo", ctx.now.timestamp(),
            lambda: run_sinfo(SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner)))
    except SlurmError:
        return {}
    return {r.name: r.reason or r.state for r in rows if r.bad}


def user_names(uids: Iterable[int | None]) -> dict[int, str]:
    names = {}
    for uid in {u for u in uids if u is not None}:
        try:
            names[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            names[uid] = f"uid {uid}"
    return names


def end_facts(ctx: TickContext, job_id: str, row: JobRow | None, name: str) -> EndFacts:
    """Accounting's record when it has the end; else the controller's row; else unknown.
    The tick's one batched answer serves when it asked about `job_id` (it does for every
    job a check declared in `ended_job_ids`)."""
    try:
        records = accounting(ctx, [job_id])
        problem = ""
    except SlurmError as exc:
        records, problem = {}, f"did not answer ({exc})"
    record = records.get(job_id)
    if record is not None and record.finished:
        return EndFacts.from_sacct(record, user_names([record.cancelled_by]))
    if not problem:
        problem = "has not recorded its end yet" if record is not None else "has no record of it"
    if row is not None and row.finished:
        return EndFacts.from_squeue(row, problem)
    return EndFacts.unknown(job_id, name, f"accounting {problem}, and the controller no longer "
                                          "remembers the job")


def explain_end(ctx: TickContext, facts: EndFacts, progress: Progress) -> Ending:
    kind_needs_nodes = classify(facts) == "node_fail"
    nodes = expand(facts.nodelist) if facts.nodelist else []
    return explain(facts, bad_nodes(ctx) if kind_needs_nodes else {}, nodes, progress)


# -- the explained endings a check keeps (final ones only: from accounting) ------------------

def to_json(ending: Ending, tail: Mapping[str, Any] | None) -> dict[str, Any]:
    facts = {k: (v.timestamp() if isinstance(v, datetime) else v) for k, v in asdict(ending.facts).items()}
    return {"facts": facts, "kind": ending.kind, "failed_nodes": [list(x) for x in ending.failed_nodes],
            "progress": asdict(ending.progress), "tail": dict(tail) if tail else None}


def from_json(data: Mapping[str, Any]) -> tuple[Ending, dict[str, Any] | None]:
    raw = dict(data["facts"])
    for key in ("start", "end"):
        if raw.get(key) is not None:
            raw[key] = datetime.fromtimestamp(raw[key]).astimezone()
    raw["earlier"] = tuple(raw.get("earlier") or ())
    ending = Ending(EndFacts(**raw), data["kind"],
                    tuple((str(n), str(r)) for n, r in data.get("failed_nodes", [])),
                    Progress(**data.get("progress", {})))
    return ending, data.get("tail")


def keep(explained: Mapping[str, Any], job_id: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The newest KEEP_EXPLAINED explained endings, by job ID."""
    merged = {**explained, job_id: dict(entry)}
    newest = sorted(merged, key=lambda i: int(i) if i.isdigit() else 0)[-KEEP_EXPLAINED:]
    return {i: merged[i] for i in newest}
