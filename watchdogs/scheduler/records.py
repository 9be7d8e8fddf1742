"""The scheduler's tables in the state database: scheduled items, run history, and the
scheduler instances (heartbeat, start and end) that the chain's crash-loop backoff reads.

Times are stored as Unix seconds. An item's `anchor` is the start of its last *completed*
run: catch-up counts from it, so a run cut off by a crash or the time limit counts as not
run.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from watchdogs.state.store import StateStore, state_problem
from watchdogs.textsafe import from_os

if TYPE_CHECKING:
    # What the scheduler writes and reads back (watchdogs.scheduler.runs): `status` reads
    # these tables without defining either dataclass.
    from watchdogs.scheduler.runs import FinishedRun, Life

SCHEMA = "scheduler"
VERSION = 1
DDL = (
    "CREATE TABLE IF NOT EXISTS sched_items (item TEXT PRIMARY KEY, kind TEXT NOT NULL,"
    " schedule TEXT NOT NULL DEFAULT '', anchor REAL, last_started REAL, last_finished REAL,"
    " last_status INTEGER, last_summary TEXT, last_log TEXT, last_job_id TEXT,"
    " running_since REAL, running_instance INTEGER, next_run REAL)",
    "CREATE TABLE IF NOT EXISTS sched_runs (id INTEGER PRIMARY KEY, item TEXT NOT NULL,"
    " instance INTEGER, due REAL, started REAL NOT NULL, finished REAL, status INTEGER,"
    " summary TEXT, log TEXT, job_id TEXT)",
    "CREATE INDEX IF NOT EXISTS sched_runs_by_item ON sched_runs (item, started)",
    "CREATE TABLE IF NOT EXISTS sched_instances (id INTEGER PRIMARY KEY, job_id TEXT, host TEXT,"
    " pid INTEGER, mode TEXT, started REAL NOT NULL, heartbeat REAL, ended REAL, reason TEXT)",
)


class Records:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        store.ensure_schema(SCHEMA, VERSION, DDL)
        # Here, not at the top: `status` reads these tables and needs nothing of the history.
        from watchdogs.state import history

        history.ensure(store)

    # -- instances -------------------------------------------------------------------
    def begin_instance(self, now: float, job_id: str | None, mode: str) -> int:
        import socket  # here, not above: `status` reads these tables and needs no socket module

        with self.store.transaction() as db:
            cur = db.execute("INSERT INTO sched_instances (job_id, host, pid, mode, started, heartbeat)"
                             " VALUES (?, ?, ?, ?, ?, ?)",
                             (job_id, socket.gethostname(), os.getpid(), mode, now, now))
            return int(cur.lastrowid or 0)

    def beat(self, instance: int, now: float, next_runs: Mapping[str, float | None]) -> None:
        """The heartbeat and every item's next run, in one transaction (one fsync a tick)."""
        with self.store.transaction() as db:
            db.execute("UPDATE sched_instances SET heartbeat = ? WHERE id = ?", (now, instance))
            db.executemany("UPDATE sched_items SET next_run = ? WHERE item = ?",
                           [(t, item) for item, t in next_runs.items()])

    def plan(self, next_runs: Mapping[str, float | None]) -> None:
        """Items' next runs, right after they were started (status shows the new plan)."""
        with self.store.transaction() as db:
            db.executemany("UPDATE sched_items SET next_run = ? WHERE item = ?",
                           [(t, item) for item, t in next_runs.items()])

    def end_instance(self, instance: int, now: float, reason: str) -> None:
        with self.store.transaction() as db:
            db.execute("UPDATE sched_instances SET ended = ?, heartbeat = ?, reason = ? WHERE id = ?",
                       (now, now, from_os(reason), instance))  # an error's text may quote a path

    def lives_before(self, instance: int, limit: int = 30) -> list[Life]:
        """Earlier chain instances, newest first."""
        from watchdogs.scheduler.runs import Life

        rows = self.store.connection().execute(
            "SELECT id, job_id, started, heartbeat, ended, reason FROM sched_instances"
            " WHERE id < ? AND mode = 'chain' ORDER BY id DESC LIMIT ?", (instance, limit)).fetchall()
        return [Life(**dict(r)) for r in rows]

    def latest_instance(self) -> dict[str, Any] | None:
        row = self.store.connection().execute(
            "SELECT * FROM sched_instances WHERE mode != 'once' ORDER BY id DESC LIMIT 1").fetchone()
        return dict(row) if row else None

    def instance_of_job(self, job_id: str) -> dict[str, Any] | None:
        """The newest instance that Slurm job `job_id` recorded (None: it has not started,
        or has not published its first tick yet). `watchdogs start` waits for it."""
        row = self.store.connection().execute(
            "SELECT * FROM sched_instances WHERE job_id = ? ORDER BY id DESC LIMIT 1", (job_id,)).fetchone()
        return dict(row) if row else None

    # -- items -----------------------------------------------------------------------
    def anchors(self) -> dict[str, float | None]:
        rows = self.store.connection().execute("SELECT item, anchor FROM sched_items").fetchall()
        return {r["item"]: r["anchor"] for r in rows}

    def items(self) -> dict[str, dict[str, Any]]:
        rows = self.store.connection().execute("SELECT * FROM sched_items").fetchall()
        return {r["item"]: dict(r) for r in rows}

    def register(self, item: str, kind: str, schedule: str) -> None:
        with self.store.transaction() as db:
            db.execute("INSERT INTO sched_items (item, kind, schedule) VALUES (?, ?, ?)"
                       " ON CONFLICT (item) DO UPDATE SET kind = excluded.kind,"
                       " schedule = excluded.schedule", (item, kind, schedule))

    def started_many(self, items: list[tuple[str, str]], instance: int | None, now: float) -> None:
        """Mark (item, kind) pairs as running in this instance (one transaction a batch)."""
        with self.store.transaction() as db:
            db.executemany("INSERT INTO sched_items (item, kind, running_since, running_instance)"
                           " VALUES (?, ?, ?, ?) ON CONFLICT (item) DO UPDATE SET"
                           " running_since = excluded.running_since,"
                           " running_instance = excluded.running_instance",
                           [(item, kind, now, instance) for item, kind in items])

    def note_job(self, item: str, job_id: str) -> None:
        """A *.slurm drop-in's job id, recorded as soon as sbatch answers (under the item's
        lock), so no other process submits the item again before the run is recorded."""
        with self.store.transaction() as db:
            db.execute("UPDATE sched_items SET last_job_id = ? WHERE item = ?", (job_id, item))

    def finished(self, runs: list[FinishedRun]) -> None:
        """Record runs (one transaction for a whole tick)."""
        with self.store.transaction() as db:
            for run in runs:
                self._finished(db, run)

    @staticmethod
    def _finished(db: Any, run: FinishedRun) -> None:
        res = run.result
        db.execute("INSERT INTO sched_runs (item, instance, due, started, finished, status, summary,"
                   " log, job_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (run.item, run.instance, run.due, run.started, run.finished,
                    int(res.status) if res else None,
                    res.summary if res else "interrupted: the scheduler stopped", run.log, run.job_id))
        if res is None:
            db.execute("UPDATE sched_items SET running_since = NULL WHERE item = ?", (run.item,))
            return
        if res.look is not None:
            from watchdogs.scheduler import story

            story.record(db, run.item, run.started, res)
        db.execute("INSERT INTO sched_items (item, kind) VALUES (?, ?) ON CONFLICT (item) DO NOTHING",
                   (run.item, run.kind))
        db.execute("UPDATE sched_items SET anchor = ?, last_started = ?, last_finished = ?,"
                   " last_status = ?, last_summary = ?, last_log = ?,"
                   " last_job_id = COALESCE(?, last_job_id), running_since = NULL WHERE item = ?",
                   (run.started, run.started, run.finished, int(res.status), res.summary, run.log,
                    run.job_id, run.item))

    def close_interrupted(self, instance: int, now: float) -> list[str]:
        """Runs left 'running' by an instance that is gone (crash, time limit, scancel):
        recorded as interrupted, so they count as not run and are caught up."""
        with self.store.transaction() as db:
            rows = db.execute("SELECT item, running_since, running_instance FROM sched_items"
                              " WHERE running_since IS NOT NULL AND"
                              " (running_instance IS NULL OR running_instance != ?)", (instance,)).fetchall()
            for r in rows:
                db.execute("INSERT INTO sched_runs (item, instance, started, finished, summary)"
                           " VALUES (?, ?, ?, ?, ?)", (r["item"], r["running_instance"], r["running_since"],
                                                       now, "interrupted: the scheduler instance ended"))
                db.execute("UPDATE sched_items SET running_since = NULL WHERE item = ?", (r["item"],))
        return [r["item"] for r in rows]

    def history(self, item: str, limit: int = 1000) -> list[dict[str, Any]]:
        rows = self.store.connection().execute(
            "SELECT * FROM sched_runs WHERE item = ? ORDER BY started DESC LIMIT ?", (item, limit)).fetchall()
        return [dict(r) for r in rows]

    def prune(self, cutoff: float) -> int:
        """Drop run history and ended instances older than `cutoff` (keeps every item's last
        result, which lives in sched_items)."""
        with self.store.transaction() as db:
            runs = db.execute("DELETE FROM sched_runs WHERE started < ?", (cutoff,)).rowcount
            from watchdogs.state import history

            runs += history.prune(db, cutoff)
            db.execute("DELETE FROM sched_instances WHERE ended IS NOT NULL AND ended < ? AND id NOT IN"
                       " (SELECT id FROM sched_instances ORDER BY id DESC LIMIT 30)", (cutoff,))
        return runs


class GuardedRecords(Records):
    """Records whose writes never stop the scheduler: a full, broken or corrupt state
    directory is handed to `report` (which says so and switches alerts to direct delivery)
    and the write is skipped; the checks go on. Other errors still raise."""

    def __init__(self, store: StateStore, report: Callable[[BaseException], object]) -> None:
        super().__init__(store)
        self.report = report

    def _skip(self, exc: BaseException) -> None:
        if state_problem(exc) is None:
            raise exc
        self.report(exc)

    def beat(self, instance: int, now: float, next_runs: Mapping[str, float | None]) -> None:
        try:
            super().beat(instance, now, next_runs)
        except Exception as exc:  # noqa: BLE001 - _skip re-raises what is not about the state
            self._skip(exc)

    def plan(self, next_runs: Mapping[str, float | None]) -> None:
        try:
            super().plan(next_runs)
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)

    def register(self, item: str, kind: str, schedule: str) -> None:
        try:
            super().register(item, kind, schedule)
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)

    def started_many(self, items: list[tuple[str, str]], instance: int | None, now: float) -> None:
        try:
            super().started_many(items, instance, now)
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)

    def finished(self, runs: list[FinishedRun]) -> None:
        try:
            super().finished(runs)
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)

    def note_job(self, item: str, job_id: str) -> None:
        try:
            super().note_job(item, job_id)
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)

    def close_interrupted(self, instance: int, now: float) -> list[str]:
        try:
            return super().close_interrupted(instance, now)
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)
            return []

    def prune(self, cutoff: float) -> int:
        try:
            return super().prune(cutoff)
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)
            return 0

    def anchors(self) -> dict[str, float | None]:
        try:
            return super().anchors()
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)
            return {}

    def items(self) -> dict[str, dict[str, Any]]:
        try:
            return super().items()
        except Exception as exc:  # noqa: BLE001 - see beat
            self._skip(exc)
            return {}
