"""What `watchdogs report` shows, read from the state database only: no Slurm command, no
filesystem probe, so writing the page cannot hang on a dead mount or load the controller.

Everything here is what the scheduler already records: its run history (`sched_runs`), its
instances and heartbeat, the alert state, log, silences and channel health, each disk
check's history and levels, and the nodes check's events. What is not recorded is listed
in `Report.missing`, said on the page instead of drawn from nothing.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from watchdogs.alerts.silences import Silence
from watchdogs.report import story
from watchdogs.report.forecastline import ForecastLine, forecast_line
from watchdogs.report.verdict import Verdict, Waiting, verdict
from watchdogs.state import watching

if TYPE_CHECKING:
    from watchdogs.config.model import Config
    from watchdogs.state.store import StateStore

WEEK = 7 * 86400.0
TRAINING_TYPES = ("job",)


@dataclass(frozen=True)
class Run:
    started: float
    finished: float
    status: str | None
    """A Status name; None for a run cut off by the scheduler stopping."""
    summary: str
    job_id: str | None


@dataclass(frozen=True)
class ItemView:
    item: str
    kind: str
    """The check type ("job", "disk", ...) or "drop-in"."""
    runs: tuple[Run, ...]
    """This week's runs, oldest first."""
    changes: tuple[Run, ...]
    """The runs where the status, the job id or the summary's first words changed."""
    story: story.TrainingStory | None
    """For a job check: its events and samples (watchdogs.state.history)."""
    last_status: str | None
    last_summary: str | None


@dataclass(frozen=True)
class DiskLevels:
    bytes_cap: float | None
    inodes_cap: float | None
    warn: float | None
    crit: float | None
    inodes_warn: float | None
    inodes_crit: float | None
    window: float


@dataclass(frozen=True)
class DiskView:
    name: str
    path: str
    bytes_used: tuple[tuple[float, float], ...]
    inodes_used: tuple[tuple[float, float], ...]
    levels: DiskLevels | None
    bytes_forecast: ForecastLine | None
    inodes_forecast: ForecastLine | None


@dataclass(frozen=True)
class NodeEvent:
    t: float
    node: str
    state: str


@dataclass(frozen=True)
class NodesView:
    name: str
    bad_now: tuple[str, ...]
    summary: str | None
    events: tuple[NodeEvent, ...]
    history: story.NodesHistory


@dataclass(frozen=True)
class OpenAlert:
    item: str
    status: str
    summary: str
    since: float | None
    acked_at: float | None
    acked_by: str | None
    muted: bool


@dataclass(frozen=True)
class AlertEntry:
    at: float
    item: str
    state: str
    status: str
    summary: str
    channels: str
    silenced_by: int | None
    resolved_after: float | None
    """For an `alert` (a problem's start): seconds until the item's next `resolved` event;
    None while open, and for the other events."""


@dataclass(frozen=True)
class Instance:
    id: int
    job_id: str | None
    host: str | None
    mode: str | None
    started: float
    heartbeat: float | None
    ended: float | None
    reason: str | None


@dataclass(frozen=True)
class Channel:
    name: str
    failing_since: float | None
    last_error: str | None
    last_ok: float | None


@dataclass(frozen=True)
class Report:
    now: float
    fine: bool
    headline: str
    trainings: tuple[ItemView, ...]
    others: tuple[ItemView, ...]
    disks: tuple[DiskView, ...]
    nodes: tuple[NodesView, ...]
    open_alerts: tuple[OpenAlert, ...]
    alert_log: tuple[AlertEntry, ...]
    silences: tuple[Silence, ...]
    instances: tuple[Instance, ...]
    heartbeat_age: float | None
    stale: bool
    channels: tuple[Channel, ...]
    outbox_pending: int
    missing: tuple[str, ...]
    watching: watching.Watching | None = None
    """Who watches (watchdogs.state.watching), judged without asking Slurm."""
    valid_until: float | None = None
    """After this the page is older than the watchdog's last promise: it may be blind."""


MISSING = (
    "GPU use over time: only the latest reading is in the heartbeat (no GPU on this cluster is tested)",
)


def _rows(db: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    """Rows, or none when the table was never made (a subsystem that has not run yet)."""
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise


def gather(config: Config, store: StateStore, now: float) -> Report:
    db = store.connection()
    since = now - WEEK
    types = {c.name: c.type for c in config.checks if c.enabled}
    items = [_item(db, r, types.get(r["item"], "drop-in"), since)
             for r in _rows(db, "SELECT * FROM sched_items ORDER BY item")]
    instances = tuple(Instance(r["id"], r["job_id"], r["host"], r["mode"], r["started"], r["heartbeat"],
                               r["ended"], r["reason"])
                      for r in _rows(db, "SELECT * FROM sched_instances WHERE mode != 'once' "
                                         "ORDER BY id DESC LIMIT 30"))
    live = instances[0] if instances and instances[0].ended is None else None
    age = now - (live.heartbeat or live.started) if live else None
    stale = age is not None and age > config.scheduler.heartbeat_stale
    open_alerts = tuple(OpenAlert(r["item"], r["notified"], r["summary"], r["since"], r["acked_at"],
                                  r["acked_by"], bool(r["muted"]))
                        for r in _rows(db, "SELECT * FROM alert_state WHERE notified != 'OK' ORDER BY since"))
    waiting = [Waiting(str(r[0]), float(r[1]), int(r[2]), r[3]) for r in _rows(
        db, "SELECT channel, created, attempts, last_error FROM outbox WHERE delivered IS NULL"
            " ORDER BY created")]
    watched = _watching(config, instances[0] if instances else None, now)
    by_status: dict[str, int] = {}
    for a in open_alerts:
        by_status[a.status] = by_status.get(a.status, 0) + 1
    period = watching_period(config, instances[0] if instances else None)
    found = verdict(watched, None, by_status, waiting, [n.name for n in config.notifiers if n.enabled], now,
                    period)
    fine, headline = _headline(items, found)
    last = instances[0].heartbeat or instances[0].started if instances else None
    disks = tuple(_disk(db, c.name, str(c.options.get("path", "")), now)
                  for c in config.checks if c.enabled and c.type == "disk")
    nodes = tuple(_nodes(store, db, c.name, next((i for i in items if i.item == c.name), None), since)
                  for c in config.checks if c.enabled and c.type == "nodes")
    return Report(
        now=now, fine=fine, headline=headline,
        trainings=tuple(i for i in items if i.kind in TRAINING_TYPES),
        others=tuple(i for i in items if i.kind not in TRAINING_TYPES),
        disks=disks, nodes=nodes, open_alerts=open_alerts, alert_log=_alert_log(db, since),
        silences=tuple(Silence(**dict(r)) for r in _rows(
            db, "SELECT * FROM silences WHERE ends >= ? ORDER BY starts", (since,))),
        instances=instances, heartbeat_age=age, stale=stale,
        channels=tuple(Channel(r["channel"], r["failing_since"], r["last_error"], r["last_ok"])
                       for r in _rows(db, "SELECT * FROM channel_health ORDER BY channel")),
        outbox_pending=len(waiting), missing=MISSING, watching=watched,
        valid_until=None if last is None else last + watched.limit)


def watching_period(config: Config, latest: Instance | None) -> float:
    home = latest.mode if latest is not None else None
    return max(config.scheduler.tick, 60.0) if home in watching.PERIODIC_HOMES else config.scheduler.tick


def _watching(config: Config, latest: Instance | None, now: float) -> watching.Watching:
    """The same judgement as `watchdogs status`, from the state alone: the page asks no
    Slurm command (so a blind chain reads "Slurm was not asked whether a successor is
    queued"), but looks whether `watchdogs stop` left its stop file."""
    import os

    try:
        stopped: float | None = os.stat(config.scheduler.stop_file).st_mtime
    except OSError:
        stopped = None
    last = None if latest is None else watching.Instance(
        latest.job_id, latest.mode or "chain", latest.host or "?", None, latest.started, latest.heartbeat,
        latest.ended, latest.reason)
    return watching.judge(last, None, now, watching_period(config, latest), config.scheduler.heartbeat_stale,
                          stopped_since=stopped)


def _item(db: sqlite3.Connection, row: sqlite3.Row, kind: str, since: float) -> ItemView:
    from watchdogs.result import Status

    names = {int(s): s.name for s in Status}  # a dict, not Status(n): a week of runs is 10,000s
    rows = _rows(db, "SELECT started, finished, status, summary, job_id FROM sched_runs"
                     " WHERE item = ? AND started >= ? ORDER BY started", (row["item"], since))
    runs = tuple(Run(started, finished or started, None if status is None else names[status], summary or "",
                     job_id) for started, finished, status, summary, job_id in rows)
    last = row["last_status"]
    told = story.training(db, row["item"], since) if kind in TRAINING_TYPES else None
    return ItemView(row["item"], kind, runs, _changes(runs), told,
                    names.get(last) if last is not None else None, row["last_summary"])


def _changes(runs: tuple[Run, ...]) -> tuple[Run, ...]:
    found, before = [], None
    for run in runs:
        gist = (run.status, run.job_id, run.summary.split(None, 3)[:3])
        if gist != before:
            found.append(run)
        before = gist
    return tuple(found)


def _headline(items: list[ItemView], found: Verdict) -> tuple[bool, str]:
    """The page's first line: the same verdict as `watchdogs status` (who watches, the
    outbox, the open alerts), and which items are not OK."""
    bad = [f"{i.item} {i.last_status}" for i in items if i.last_status not in (None, "OK")]
    words = [f.words for f in found.problems()]
    if bad:
        words.append(f"{len(bad)} not OK: " + ", ".join(bad[:4]) + (" ..." if len(bad) > 4 else ""))
    if words:
        return False, "; ".join(words)
    return True, f"All fine: {len(items)} checks and drop-ins OK, no open alerts; the watchdog is watching"


def _disk(db: sqlite3.Connection, name: str, path: str, now: float) -> DiskView:
    rows = _rows(db, "SELECT t, bytes_used, inodes_used FROM disk_history WHERE check_name = ? ORDER BY t",
                 (name,))
    used = tuple((r[0], float(r[1])) for r in rows)
    inodes = tuple((r[0], float(r[2])) for r in rows if r[2] is not None)
    kv = _rows(db, "SELECT value FROM kv WHERE namespace = 'check.disk.levels' AND key = ?", (name,))
    levels = None
    if kv:
        import json

        levels = DiskLevels(**json.loads(kv[0][0]))
    if levels is None:  # written by a disk check older than the report: no capacity, no forecast
        return DiskView(name, path, used, inodes, None, None, None)
    lv = levels
    return DiskView(name, path, used, inodes, lv,
                    forecast_line(used, now, lv.window, lv.warn, lv.crit, lv.bytes_cap),
                    forecast_line(inodes, now, lv.window, lv.inodes_warn, lv.inodes_crit, lv.inodes_cap))


def _nodes(store: StateStore, db: sqlite3.Connection, name: str, item: ItemView | None,
           since: float) -> NodesView:
    bad = store.kv_get("check.nodes", name, {}).get("bad", [])
    events = tuple(NodeEvent(r[0], r[1], r[2]) for r in
                   _rows(db, "SELECT t, node, state FROM node_events WHERE check_name = ? ORDER BY t",
                         (name,)))
    return NodesView(name, tuple(bad), item.last_summary if item else None, events,
                     story.nodes(db, name, since))


def _alert_log(db: sqlite3.Connection, since: float) -> tuple[AlertEntry, ...]:
    rows = _rows(db, "SELECT * FROM alert_log WHERE at >= ? ORDER BY at", (since,))
    entries = []
    for i, r in enumerate(rows):
        resolved = None
        if r["state"] == "alert":
            end = next((later for later in rows[i + 1:] if later["item"] == r["item"]
                        and later["state"] == "resolved"), None)
            resolved = end["at"] - r["at"] if end is not None else None
        entries.append(AlertEntry(r["at"], r["item"], r["state"], r["status"], r["summary"], r["channels"],
                                  r["silenced_by"], resolved))
    return tuple(reversed(entries))
