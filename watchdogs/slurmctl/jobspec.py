"""Which jobs a `job` check watches, and one squeue query that covers many checks."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watchdogs.slurmctl.squeue import JobQuery, JobRow
from watchdogs.userregex import fullmatch


@dataclass(frozen=True)
class JobSpec:
    job_name: str | None = None
    job_regex: Any = None        # a user pattern (watchdogs.userregex), time-bounded
    users: tuple[str, ...] = ()
    """As configured: names, "@group", "*"; () means the user running the watchdog."""
    partitions: tuple[str, ...] | None = None
    cluster: str | None = None
    job_ids: tuple[str, ...] | None = None
    """Only these jobs (raw ids, or an array's own id for all its tasks); None: any."""

    @classmethod
    def from_options(cls, opts: Mapping[str, Any]) -> JobSpec:
        return cls(opts.get("job_name"), opts.get("job_regex"), tuple(opts.get("users") or ()),
                   tuple(opts["partition"]) if opts.get("partition") else None,
                   opts.get("cluster"))

    def describe(self) -> str:
        if self.job_name:
            what = f"name {self.job_name!r}"
        elif self.job_regex is not None:
            what = f"name matching /{self.job_regex.pattern}/"
        else:
            what = "any name"
        if self.job_ids:
            what += f" among jobs {', '.join(self.job_ids)}"
        if self.users:
            what += f" of {', '.join(self.users)}"
        if self.partitions:
            what += f" in {', '.join(self.partitions)}"
        return what + (f" on cluster {self.cluster}" if self.cluster else "")

    def matches(self, row: JobRow, users: frozenset[str] | None) -> bool:
        """`users` is this spec's `users` resolved (None: anyone)."""
        if self.job_name is not None and row.name != self.job_name:
            return False
        if self.job_regex is not None and not fullmatch(self.job_regex, row.name, f"job name {row.name!r}"):
            return False
        if self.job_ids is not None and not (row.raw_id in self.job_ids or row.array_job_id in self.job_ids):
            return False
        if users is not None and row.user not in users:
            return False
        if self.partitions and not set(row.partition.split(",")) & set(self.partitions):
            return False
        return row.cluster == self.cluster if self.cluster else True


def plan_queries(specs: Sequence[JobSpec],
                 resolved: Mapping[tuple[str, ...], frozenset[str] | None]) -> list[JobQuery]:
    """The fewest squeue calls covering every spec: one, or two when some checks name a
    cluster (-M) and others watch the local one. The controller filters (names, users, job
    ids, partitions), so a busy queue costs what is watched, not what is queued.

    squeue ANDs its filters, and a row must reach every spec that wants it: each axis is
    the union of what the specs need, and one spec without a filter on an axis (a regex
    name, users = "*", no job ids) removes that filter (it needs every job on that axis).
    The result is a superset of every spec's rows; each check then takes its own from the
    snapshot's index."""
    local = [s for s in specs if s.cluster is None]
    remote = [s for s in specs if s.cluster is not None]
    queries = []
    if local:
        queries.append(_union(local, resolved, clusters=None))
    if remote:
        clusters = tuple(sorted({s.cluster for s in remote if s.cluster}))
        queries.append(_union(remote, resolved, clusters=clusters))
    return queries


def _union(specs: Sequence[JobSpec], resolved: Mapping[tuple[str, ...], frozenset[str] | None],
           clusters: tuple[str, ...] | None) -> JobQuery:
    user_sets = [resolved[s.users] for s in specs]
    users = (None if any(u is None for u in user_sets)
             else _sorted_union([u for u in user_sets if u is not None]))
    # squeue splits --name at commas: a name holding one cannot be asked for by name.
    names = (None if any(s.job_name is None or "," in s.job_name for s in specs)
             else _sorted_union([{s.job_name} for s in specs]))
    parts = (None if any(not s.partitions for s in specs)
             else _sorted_union([set(s.partitions or ()) for s in specs]))
    ids = (None if any(s.job_ids is None for s in specs)
           else _sorted_union([set(s.job_ids or ()) for s in specs]))
    return JobQuery(users, names, parts, clusters, ids)


def _sorted_union(sets: Iterable[Iterable[str | None]]) -> tuple[str, ...]:
    return tuple(sorted({v for s in sets for v in s if v is not None}))
