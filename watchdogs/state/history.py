"""History kept for the status page (`watchdogs report`): the training's story over time.

Three tables, each pruned with the run history by `log_retention` (so the page never eats
the quota it watches), each written in the transaction of what it records:

- `story_events`: what happened to a watched training, told apart (queued, running,
  requeued, preempted, hung, ended) with its job id and cause;
- `training_samples`: one sample per look of a `training` check (step, throughput, loss,
  newest checkpoint step, restarts so far);
- `node_counts`: a `nodes` check's drained/down counts, a row only when they change (a step
  line), and its last look's reasons in `story_last_nodes`.

`story_last` holds each job check's previous look (typed columns), the other end of the
comparison that tells a requeue from a start.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchdogs.result import JobLook
    from watchdogs.state.store import StateStore

SCHEMA, VERSION = "history", 1
DDL = (
    "CREATE TABLE IF NOT EXISTS story_events (item TEXT NOT NULL, t REAL NOT NULL, kind TEXT NOT NULL,"
    " job_id TEXT, cause TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS story_events_by_item ON story_events (item, t)",
    "CREATE TABLE IF NOT EXISTS story_last (item TEXT PRIMARY KEY, phase TEXT NOT NULL, job_id TEXT,"
    " start REAL, reason TEXT NOT NULL DEFAULT '')",
    "CREATE TABLE IF NOT EXISTS training_samples (item TEXT NOT NULL, t REAL NOT NULL, step INTEGER NOT NULL,"
    " rate REAL, unit TEXT, loss REAL, checkpoint_step INTEGER, restarts INTEGER NOT NULL DEFAULT 0,"
    " phase TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS training_samples_by_item ON training_samples (item, t)",
    "CREATE TABLE IF NOT EXISTS node_counts (item TEXT NOT NULL, t REAL NOT NULL, drained INTEGER NOT NULL,"
    " down INTEGER NOT NULL, total INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS node_counts_by_item ON node_counts (item, t)",
    "CREATE TABLE IF NOT EXISTS story_last_nodes (item TEXT NOT NULL, node TEXT NOT NULL,"
    " state TEXT NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (item, node))",
)
TABLES = ("story_events", "training_samples", "node_counts")
REQUEUES = ("requeued", "preempted")


@dataclass(frozen=True)
class Event:
    item: str
    t: float
    kind: str
    """queued, running, requeued, preempted, hung, paused or ended."""
    job_id: str | None
    cause: str


@dataclass(frozen=True)
class Sample:
    t: float
    step: int
    rate: float | None
    unit: str | None
    loss: float | None
    checkpoint_step: int | None
    restarts: int
    phase: str


@dataclass(frozen=True)
class NodeCount:
    t: float
    drained: int
    down: int
    total: int


def ensure(store: StateStore) -> None:
    store.ensure_schema(SCHEMA, VERSION, DDL)


def add_events(db: sqlite3.Connection, events: list[Event]) -> None:
    db.executemany("INSERT INTO story_events VALUES (?, ?, ?, ?, ?)",
                   [(e.item, e.t, e.kind, e.job_id, e.cause) for e in events])


def last_look(db: sqlite3.Connection, item: str) -> JobLook | None:
    from watchdogs.result import JobLook

    row = db.execute("SELECT phase, job_id, start, reason FROM story_last WHERE item = ?", (item,)).fetchone()
    return None if row is None else JobLook(row[0], row[1], row[2], row[3])


def keep_look(db: sqlite3.Connection, item: str, look: JobLook) -> None:
    db.execute("INSERT OR REPLACE INTO story_last VALUES (?, ?, ?, ?, ?)",
               (item, look.phase, look.job_id, look.start, look.reason))


def restarts(db: sqlite3.Connection, item: str, job_id: str | None) -> int:
    """How often the job was requeued (or preempted) as the timeline recorded it."""
    if job_id is None:
        return 0
    row = db.execute("SELECT COUNT(*) FROM story_events WHERE item = ? AND job_id = ? AND kind IN (?, ?)",
                     (item, job_id, *REQUEUES)).fetchone()
    return int(row[0])


def add_sample(db: sqlite3.Connection, item: str, sample: Sample) -> None:
    db.execute("INSERT INTO training_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (item, sample.t, sample.step, sample.rate, sample.unit, sample.loss, sample.checkpoint_step,
                sample.restarts, sample.phase))


def last_phase(db: sqlite3.Connection, item: str) -> str | None:
    row = db.execute("SELECT phase FROM training_samples WHERE item = ? ORDER BY t DESC LIMIT 1",
                     (item,)).fetchone()
    return None if row is None else str(row[0])


def add_node_count(db: sqlite3.Connection, item: str, count: NodeCount,
                   bad: list[tuple[str, str, str]]) -> None:
    """A row only when the counts change; the reasons of this look replace the last's."""
    row = db.execute("SELECT drained, down, total FROM node_counts WHERE item = ? ORDER BY t DESC LIMIT 1",
                     (item,)).fetchone()
    if row is None or tuple(row) != (count.drained, count.down, count.total):
        db.execute("INSERT INTO node_counts VALUES (?, ?, ?, ?, ?)",
                   (item, count.t, count.drained, count.down, count.total))
    db.execute("DELETE FROM story_last_nodes WHERE item = ?", (item,))
    db.executemany("INSERT INTO story_last_nodes VALUES (?, ?, ?, ?)", [(item, *b) for b in bad])


def prune(db: sqlite3.Connection, cutoff: float) -> int:
    """Rows older than `cutoff`; the newest node count of each check stays (the line's start)."""
    removed = 0
    for table in TABLES:
        keep = (" AND rowid NOT IN (SELECT MAX(rowid) FROM node_counts GROUP BY item)"
                if table == "node_counts" else "")
        # The table names are the constants above, never data.
        removed += db.execute(f"DELETE FROM {table} WHERE t < ?{keep}", (cutoff,)).rowcount
    return removed


def events(db: sqlite3.Connection, item: str, since: float) -> tuple[Event, ...]:
    rows = db.execute("SELECT item, t, kind, job_id, cause FROM story_events WHERE item = ? AND t >= ?"
                      " ORDER BY t, rowid", (item, since)).fetchall()
    return tuple(Event(*r) for r in rows)


def samples(db: sqlite3.Connection, item: str, since: float) -> tuple[Sample, ...]:
    rows = db.execute("SELECT t, step, rate, unit, loss, checkpoint_step, restarts, phase"
                      " FROM training_samples WHERE item = ? AND t >= ? ORDER BY t", (item, since)).fetchall()
    return tuple(Sample(*r) for r in rows)


def node_counts(db: sqlite3.Connection, item: str, since: float) -> tuple[NodeCount, ...]:
    rows = db.execute("SELECT t, drained, down, total FROM node_counts WHERE item = ? ORDER BY t",
                      (item,)).fetchall()
    kept = [NodeCount(*r) for r in rows]
    before = [c for c in kept if c.t < since]
    return tuple(before[-1:] + [c for c in kept if c.t >= since])


def node_reasons(db: sqlite3.Connection, item: str) -> tuple[tuple[str, str, str], ...]:
    rows = db.execute("SELECT node, state, reason FROM story_last_nodes WHERE item = ? ORDER BY node",
                      (item,)).fetchall()
    return tuple((r[0], r[1], r[2]) for r in rows)
