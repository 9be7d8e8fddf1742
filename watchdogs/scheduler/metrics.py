"""The metrics textfile: one file per tick in Prometheus' text format, for node_exporter's
textfile collector (`--collector.textfile.directory`), so the site's monitoring sees what
the watchdog sees. Set `[scheduler] metrics_dir`; the file is `<metrics_dir>/watchdogs.prom`,
written to a temporary name and renamed (the collector never reads half a file).

What it holds: each item's last status (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) and when
it last finished; open alerts; channel health; the scheduler's own heartbeat age; and per
`training` check the step, loss, throughput and its baseline, the time since the last
checkpoint and since the newest trainguard heartbeat, and the open findings. Everything is
read from the state database (no filesystem probe, no Slurm call): a table that does not
exist yet is left out. Label values are escaped as the format requires.
"""
from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdogs import ownfiles

if TYPE_CHECKING:
    from watchdogs.state.store import StateStore

LOG = logging.getLogger("watchdogs.scheduler")
FILE_NAME = "watchdogs.prom"
STATUS_VALUE = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
TRAINING = "check.training.metrics"   # what watchdogs.checks.training keeps per check


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Family:
    """One metric family: HELP, TYPE (gauge) and its samples."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self.samples: list[tuple[dict[str, str], float]] = []

    def add(self, value: float, **labels: str) -> None:
        self.samples.append((labels, value))

    def render(self) -> Iterator[str]:
        if not self.samples:
            return
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} gauge"
        for labels, value in self.samples:
            text = ",".join(f'{k}="{escape(v)}"' for k, v in sorted(labels.items()))
            yield f"{self.name}{{{text}}} {_number(value)}" if text else f"{self.name} {_number(value)}"


def _rows(db: sqlite3.Connection, sql: str) -> list[sqlite3.Row]:
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []     # no such table yet (no alert, no channel so far)


def collect(store: StateStore, now: float) -> list[Family]:
    db = store.connection()
    status = Family("watchdogs_item_status", "last status of a check or drop-in: 0 OK, 1 WARNING, "
                                             "2 CRITICAL, 3 UNKNOWN")
    finished = Family("watchdogs_item_last_finished_seconds", "seconds since the item last finished")
    for row in _rows(db, "SELECT item, kind, last_status, last_finished FROM sched_items"):
        if row["last_status"] is not None:
            status.add(row["last_status"], item=row["item"], kind=row["kind"])
        if row["last_finished"] is not None:
            finished.add(max(0.0, now - row["last_finished"]), item=row["item"])
    alerts = Family("watchdogs_alert_open", "1 per open alert, labelled with its announced status")
    for row in _rows(db, "SELECT item, notified FROM alert_state WHERE notified != 'OK'"):
        alerts.add(1, item=row["item"], status=str(row["notified"]))
    total = Family("watchdogs_alerts_open", "open alerts")
    total.add(len(alerts.samples))
    up = Family("watchdogs_channel_up", "1 when the channel's last delivery worked, 0 while it fails")
    failing = Family("watchdogs_channel_failing_seconds", "seconds the channel has been failing")
    for row in _rows(db, "SELECT channel, failing_since FROM channel_health"):
        up.add(0 if row["failing_since"] is not None else 1, channel=row["channel"])
        if row["failing_since"] is not None:
            failing.add(max(0.0, now - row["failing_since"]), channel=row["channel"])
    beat = Family("watchdogs_scheduler_heartbeat_age_seconds", "seconds since the scheduler's last tick")
    for row in _rows(db, "SELECT heartbeat FROM sched_instances WHERE heartbeat IS NOT NULL "
                         "ORDER BY id DESC LIMIT 1"):
        beat.add(max(0.0, now - row["heartbeat"]))
    return [status, finished, alerts, total, up, failing, beat, *training(db, now)]


def training(db: sqlite3.Connection, now: float) -> list[Family]:
    import json

    fams = {name: Family(f"watchdogs_training_{name}", text) for name, text in (
        ("step", "the newest step of the training's ranks"),
        ("loss", "the last loss read (NaN once the loss is NaN)"),
        ("throughput", "per rank, in `unit` per second, over trainguard's last window"),
        ("throughput_baseline", "this run's own throughput after warm-up (0: not measured yet)"),
        ("checkpoint_step", "the last good checkpoint's step"),
        ("checkpoint_age_seconds", "seconds since the last checkpoint was saved"),
        ("heartbeat_age_seconds", "seconds since the newest trainguard heartbeat"),
        ("finding", "1 per open finding of trainguard (nan_loss, straggler, throughput, ...)"))}
    for row in _rows(db, f"SELECT key, value FROM kv WHERE namespace = '{TRAINING}'"):
        try:
            data: Mapping[str, Any] = json.loads(row["value"])
        except ValueError:
            continue
        if not data:
            continue
        check = str(row["key"])
        fams["step"].add(float(data["step"]), check=check)
        if data.get("nan"):
            fams["loss"].add(math.nan, check=check)
        elif data.get("loss") is not None:
            fams["loss"].add(float(data["loss"]), check=check)
        fams["throughput"].add(float(data.get("rate", 0.0)), check=check, unit=str(data.get("unit", "steps")))
        fams["throughput_baseline"].add(float(data.get("baseline", 0.0)), check=check,
                                        unit=str(data.get("unit", "steps")))
        if int(data.get("checkpoint_step", -1)) >= 0:
            fams["checkpoint_step"].add(float(data["checkpoint_step"]), check=check)
        if float(data.get("checkpoint_time", 0.0)) > 0:
            fams["checkpoint_age_seconds"].add(max(0.0, now - float(data["checkpoint_time"])), check=check)
        fams["heartbeat_age_seconds"].add(max(0.0, now - float(data["heartbeat_time"])), check=check)
        for kind in data.get("findings", ()):
            fams["finding"].add(1, check=check, kind=str(kind))
    return list(fams.values())


def render(families: list[Family]) -> str:
    return "".join(f"{line}\n" for fam in families for line in fam.render())


def write(directory: Path, store: StateStore, now: float) -> Path:
    """Render and replace `<directory>/watchdogs.prom` atomically (rename in one directory)."""
    # metrics_dir may be a folder a group shares (node_exporter's textfile folder): the
    # temporary file is made by mkstemp (never a link someone planted), then renamed.
    # 0644: node_exporter runs as its own user.
    return ownfiles.write_atomic(Path(directory) / FILE_NAME, render(collect(store, now)).encode(), 0o644)


def write_tick(directory: Path | None, store: StateStore, now: float) -> None:
    """The scheduler's per-tick hook: a failure is logged, never stops the loop."""
    if directory is None:
        return
    try:
        write(directory, store, now)
    except (OSError, sqlite3.Error, KeyError, TypeError, ValueError) as exc:
        LOG.warning("cannot write the metrics textfile in %s: %s", directory, exc)
