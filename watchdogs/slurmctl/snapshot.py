"""The tick's one job snapshot: every check that watches jobs (`job`, and `log_stale` or
`nodes` linked to a `job` check) declares its JobSpecs through `watched_jobs(ctx)`; the
first caller runs the planned squeue for all of them, the others reuse it (ctx.shared)."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from watchdogs.errors import WatchdogsError
from watchdogs.slurmctl.backoff import guarded
from watchdogs.slurmctl.jobspec import JobSpec, plan_queries
from watchdogs.slurmctl.squeue import JobRow, run_query
from watchdogs.slurmctl.users import resolve_users

if TYPE_CHECKING:
    from watchdogs.checks.context import TickContext

SLURM_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class JobSnapshot:
    rows: tuple[JobRow, ...]
    specs: tuple[JobSpec, ...]
    users: Mapping[tuple[str, ...], frozenset[str] | None] = field(default_factory=dict)
    calls: int = 0

    def covers(self, spec: JobSpec) -> bool:
        return spec in self.specs and spec.users in self.users

    def matching(self, spec: JobSpec) -> list[JobRow]:
        return [r for r in self.rows if spec.matches(r, self.users[spec.users])]


def slurm_env(ctx: TickContext) -> dict[str, str] | None:
    """The tick's environment over ours (SLURM_CONF and friends), or None to inherit."""
    return {**os.environ, **ctx.env} if ctx.env else None


def watched_specs(ctx: TickContext) -> list[JobSpec]:
    specs: list[JobSpec] = []
    for check in (*ctx.checks, *ctx.watchers):
        watched = getattr(check, "watched_jobs", None)
        if watched is None:
            continue
        try:
            specs.extend(s for s in watched(ctx) if s not in specs)
        except WatchdogsError:
            continue  # that check reports its own problem; the others still get a snapshot
    return specs


def job_snapshot(ctx: TickContext, spec: JobSpec) -> JobSnapshot:
    """The shared snapshot when it covers `spec`; else (a check run outside its tick's
    check list) a snapshot of its own, still memoised for the tick."""
    snapshot = ctx.shared("squeue", lambda: fetch(ctx, watched_specs(ctx)))
    if snapshot.covers(spec):
        return snapshot
    return ctx.shared(f"squeue:{spec!r}", lambda: fetch(ctx, [spec]))


def fetch(ctx: TickContext, specs: Sequence[JobSpec]) -> JobSnapshot:
    users: dict[tuple[str, ...], frozenset[str] | None] = {}
    for spec in specs:
        try:
            users[spec.users] = resolve_users(spec.users)
        except WatchdogsError:
            continue  # an unknown group: that check says so; the rest are still watched
    usable = [s for s in specs if s.users in users]
    env = slurm_env(ctx)
    rows: list[JobRow] = []
    queries = plan_queries(usable, users)
    for query in queries:
        rows.extend(guarded(ctx.store, "squeue", ctx.now.timestamp(),
                            lambda q=query: run_query(q, SLURM_TIMEOUT_S, env)))
    return JobSnapshot(tuple(rows), tuple(usable), users, len(queries))
