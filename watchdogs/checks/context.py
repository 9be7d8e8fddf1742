"""What a tick hands to the checks it runs: the time, the state store, the Slurm command
runner (`run_slurm`, or recorded output in a unit test), and memoised snapshots shared by
every check in the tick (one squeue and one sinfo, whatever the number of checks)."""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from watchdogs.errors import WatchdogsError
from watchdogs.slurmctl.jobspec import JobSpec
from watchdogs.slurmctl.runner import DEFAULT_TIMEOUT_S, SlurmRunner, run_slurm, within_budget
from watchdogs.slurmctl.snapshot import JobSnapshot, fetch, merged_env

if TYPE_CHECKING:
    from watchdogs.checks.base import Check
    from watchdogs.config.model import Config
    from watchdogs.result import CheckResult
    from watchdogs.state.store import StateStore

T = TypeVar("T")


class TickContext:
    def __init__(self, now: datetime, store: StateStore, checks: Sequence[Check] = (),
                 env: Mapping[str, str] | None = None, config: Config | None = None,
                 watchers: Sequence[object] = (), runner: SlurmRunner = run_slurm,
                 slurm_budget: float = DEFAULT_TIMEOUT_S) -> None:
        self.now = now
        self.config = config
        self.store = store
        self.checks = tuple(checks)
        # Non-check parts of the tick that want jobs in the tick's one squeue snapshot
        # (objects with `watched_jobs(ctx)`, like the checks that watch jobs).
        self.watchers = tuple(watchers)
        self.env: Mapping[str, str] = dict(env or {})
        # One budget for every Slurm command of the tick (see `within_budget`).
        self.runner = within_budget(runner, slurm_budget)
        self.results: dict[str, CheckResult] = {}
        self._shared: dict[str, tuple[bool, Any]] = {}
        # Re-entrant: a shared value may be built from others (the tick's sacct call asks
        # every job check which jobs ended, from the shared squeue snapshot).
        self._lock = threading.RLock()

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """The value of `factory()`, computed once per tick for every caller of `key`.
        A failure is remembered too, so a down controller is asked once, not once per check."""
        with self._lock:
            if key not in self._shared:
                try:
                    self._shared[key] = (True, factory())
                except Exception as exc:  # noqa: BLE001 - re-raised to every caller below
                    self._shared[key] = (False, exc)
            ok, value = self._shared[key]
        if not ok:
            raise value
        return value

    def checks_of(self, cls: type) -> list[Check]:
        return [c for c in self.checks if isinstance(c, cls)]

    def wanted_ids(self, method: str, parts: Sequence[object]) -> list[str]:
        """The job ids every part of the tick asks for through its `method(ctx)` (a part
        without it asks for none), in one list without repeats: one Slurm call answers them
        all. A part that fails here reports its own problem when it runs."""
        ids: list[str] = []
        for part in parts:
            wanted = getattr(part, method, None)
            if wanted is None:
                continue
            try:
                ids.extend(i for i in wanted(self) if i not in ids)
            except Exception:  # noqa: BLE001 - that part reports its own problem when it runs
                continue
        return ids

    def slurm_env(self) -> dict[str, str] | None:
        """The tick's environment over ours (SLURM_CONF and friends), or None to inherit."""
        return merged_env(self.env)

    def watched_specs(self) -> list[JobSpec]:
        """The JobSpecs of every check and watcher of the tick that watches jobs."""
        specs: list[JobSpec] = []
        for check in (*self.checks, *self.watchers):
            watched = getattr(check, "watched_jobs", None)
            if watched is None:
                continue
            try:
                specs.extend(s for s in watched(self) if s not in specs)
            except WatchdogsError:
                continue  # that check reports its own problem; the others still get a snapshot
        return specs

    def job_snapshot(self, spec: JobSpec) -> JobSnapshot:
        """The tick's one squeue snapshot when it covers `spec`; else (a check run outside its
        tick's check list) a snapshot of its own, still memoised for the tick."""
        snapshot = self.shared("squeue", lambda: self._fetch(self.watched_specs()))
        if snapshot.covers(spec):
            return snapshot
        return self.shared(f"squeue:{spec!r}", lambda: self._fetch([spec]))

    def _fetch(self, specs: Sequence[JobSpec]) -> JobSnapshot:
        return fetch(specs, self.store, self.now.timestamp(), self.slurm_env(), self.runner)
