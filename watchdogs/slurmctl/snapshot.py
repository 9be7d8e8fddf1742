"""One squeue snapshot for many job specs: the caller (the tick, `TickContext.job_snapshot`)
collects the JobSpecs of every check that watches jobs and hands them down; this plans the
fewest squeue calls that cover them all and runs them through the caller's Slurm runner."""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
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
    index: RowIndex = field(init=False, repr=False, compare=False)
    _spec_set: frozenset[JobSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", RowIndex(self.rows))
        # Every check asks `covers` a few times a tick: a hash lookup, not a scan of the specs.
        object.__setattr__(self, "_spec_set", frozenset(self.specs))

    def covers(self, spec: JobSpec) -> bool:
        return spec in self._spec_set and spec.users in self.users

    def matching(self, spec: JobSpec) -> list[JobRow]:
        """The rows of `spec`, in squeue's order; from the index (built once per snapshot),
        so 20 checks over a large reply do not each scan every row."""
        return self.index.matching(spec, self.users[spec.users])


class RowIndex:
    """The rows of one snapshot by name, user and job id, and each spec's answer once.
    Private to its snapshot; a check may ask from any thread of the tick (the worst a
    race does is compute the same answer twice)."""

    def __init__(self, rows: Sequence[JobRow]) -> None:
        self._rows = tuple(rows)
        self._by_name: dict[str, list[int]] = {}
        self._by_user: dict[str, list[int]] = {}
        self._by_id: dict[str, list[int]] = {}
        for i, row in enumerate(self._rows):
            self._by_name.setdefault(row.name, []).append(i)
            self._by_user.setdefault(row.user, []).append(i)
            self._by_id.setdefault(row.raw_id, []).append(i)
            if row.array_job_id and row.array_job_id != row.raw_id:
                self._by_id.setdefault(row.array_job_id, []).append(i)
        self._answers: dict[tuple[JobSpec, frozenset[str] | None], list[JobRow]] = {}

    def matching(self, spec: JobSpec, users: frozenset[str] | None) -> list[JobRow]:
        key = (spec, users)
        found = self._answers.get(key)
        if found is None:
            found = [self._rows[i] for i in self._candidates(spec, users)
                     if spec.matches(self._rows[i], users)]
            self._answers[key] = found
        return list(found)

    def _candidates(self, spec: JobSpec, users: frozenset[str] | None) -> list[int] | range:
        """Row numbers that may match, from the narrowest index the spec allows."""
        if spec.job_ids is not None:
            return _merged(self._by_id, spec.job_ids)
        if spec.job_name is not None:
            return self._by_name.get(spec.job_name, [])
        if users is not None:
            return _merged(self._by_user, users)
        return range(len(self._rows))


def _merged(index: Mapping[str, list[int]], keys: Iterable[str]) -> list[int]:
    """The row numbers under any of `keys`, each once, in squeue's order."""
    return sorted({i for key in keys for i in index.get(key, ())})


def merged_env(env: Mapping[str, str]) -> dict[str, str] | None:
    """`env` (SLURM_CONF and friends) over ours, or None to inherit ours unchanged."""
    return {**os.environ, **env} if env else None


def fetch(specs: Sequence[JobSpec], store: StateStore, now: float, env: Mapping[str, str] | None,
          runner: SlurmRunner) -> JobSnapshot:
    """The planned squeue calls for `specs`, each skipped while the controller asks us to back off."""
    users: dict[tuple[str, ...], frozenset[str] | None] = {}
    refused: set[tuple[str, ...]] = set()
    for spec in specs:
        if spec.users in users or spec.users in refused:
            continue  # most checks share one `users` (the default): resolve it once
        try:
            users[spec.users] = resolve_users(spec.users)
        except WatchdogsError:
            refused.add(spec.users)  # an unknown group: that check says so; the rest are still watched
    usable = [s for s in specs if s.users in users]
    rows: list[JobRow] = []
    queries = plan_queries(usable, users)
    for query in queries:
        rows.extend(guarded(store, "squeue", now, partial(run_query, query, SLURM_TIMEOUT_S, env, runner)))
    return JobSnapshot(tuple(rows), tuple(usable), users, len(queries))
