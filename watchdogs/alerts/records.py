"""Reading and writing alert_state rows and the alert_log."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from watchdogs.alerts.lifecycle import ItemState
from watchdogs.result import Status
from watchdogs.textsafe import from_os

_FIELDS = ("item", "kind", "status", "summary", "since", "bad_streak", "status_streak", "fingerprint",
           "notified", "notified_fingerprint", "last_notified", "acked_at", "acked_by", "muted", "updated")


def _from_row(row: sqlite3.Row) -> ItemState:
    values = {k: row[k] for k in _FIELDS}
    values["status"] = Status[values["status"]]
    values["notified"] = Status[values["notified"]]
    values["muted"] = bool(values["muted"])
    return ItemState(**values)


def _to_row(state: ItemState) -> tuple[object, ...]:
    values = [getattr(state, k) for k in _FIELDS]
    values[_FIELDS.index("status")] = state.status.name
    values[_FIELDS.index("notified")] = state.notified.name
    values[_FIELDS.index("muted")] = int(state.muted)
    return _storable(values)


def _storable(values: Iterable[object]) -> tuple[object, ...]:
    """The last line of defence behind the result seam (watchdogs.result.storable): sqlite
    refuses a lone surrogate, and one such text must not lose the whole tick's states. An
    author read from a command file, say, that still holds one is stored as `\\xNN`."""
    return tuple(from_os(v) if isinstance(v, str) else v for v in values)


def load_states(db: sqlite3.Connection, items: Iterable[str] | None = None) -> dict[str, ItemState]:
    """States of `items` (every item when None)."""
    rows = db.execute("SELECT * FROM alert_state").fetchall()
    wanted = None if items is None else set(items)
    return {row["item"]: _from_row(row) for row in rows if wanted is None or row["item"] in wanted}


def save_states(db: sqlite3.Connection, states: Sequence[ItemState]) -> None:
    marks = ", ".join("?" for _ in _FIELDS)
    db.executemany(f"INSERT OR REPLACE INTO alert_state ({', '.join(_FIELDS)}) VALUES ({marks})",
                   [_to_row(s) for s in states])


LogRow = tuple[float, str, str, str, str, str, "int | None"]


def log_events(db: sqlite3.Connection, rows: Sequence[LogRow]) -> None:
    """(at, item, state, status, summary, channels, silenced_by) per event."""
    db.executemany("INSERT INTO alert_log (at, item, state, status, summary, channels, silenced_by)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?)", [_storable(row) for row in rows])


def history(db: sqlite3.Connection, limit: int) -> list[dict[str, Any]]:
    rows = db.execute("SELECT * FROM alert_log ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
    return [dict(row) for row in rows]


def acknowledge(db: sqlite3.Connection, items: Sequence[str], now: float, author: str) -> int:
    """Acknowledge the open alerts of `items`: no repeats until their status changes."""
    author = from_os(author)
    changed = 0
    for item in items:
        changed += db.execute("UPDATE alert_state SET acked_at = ?, acked_by = ? WHERE item = ?"
                              " AND notified != 'OK'", (now, author, item)).rowcount
    return changed


def prune(db: sqlite3.Connection, before: float) -> None:
    db.execute("DELETE FROM alert_log WHERE at < ?", (before,))
