"""One squeue snapshot for many job specs: the caller (the tick, `TickContext.job_snapshot`)
collects the JobSpecs of every check that watches jobs and hands them down; this plans the
fewest squeue calls that cover them all and runs them through the caller's Slurm runner."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from watchdogs.errors import WatchdogsError
from watchdogs.slurmctl.backoff import guarded
from watchdogs.slurmctl.jobspec import JobSpec, plan_queries
from watchdogs.slurmctl.runner import SlurmRunner
from watchdogs.slurmctl.squeue import JobRow, run_query
from watchdogs.slurmctl.users import resolve_users

if TYPE_CHECKING:
    from watchdogs.state.store import StateStore

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


def merged_env(env: Mapping[str, str]) -> dict[str, str] | None:
    """`env` (SLURM_CONF and friends) over ours, or None to inherit ours unchanged."""
    return {**os.environ, **env} if env else None


def fetch(specs: Sequence[JobSpec], store: StateStore, now: float, env: Mapping[str, str] | None,
          runner: SlurmRunner) -> JobSnapshot:
    """The planned squeue calls for `specs`, each skipped while the controller asks us to back off."""
    users: dict[tuple[str, ...], frozenset[str] | None] = {}
    for spec in specs:
        try:
            users[spec.users] = resolve_users(spec.users)
        except WatchdogsError:
            continue  # an unknown group: that check says so; the rest are still watched
    usable = [s for s in specs if s.users in users]
    rows: list[JobRow] = []
    queries = plan_queries(usable, users)
    for query in queries:
        rows.extend(guarded(store, "squeue", now, partial(run_query, query, SLURM_TIMEOUT_S, env, runner)))
    return JobSnapshot(tuple(rows), tuple(usable), users, len(queries))
