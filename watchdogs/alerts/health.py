"""Channel health: since when a channel fails, and whether the others were told."""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True)
class Health:
    channel: str
    failing_since: float | None
    last_error: str | None
    last_ok: float | None
    down_alerted: bool


def _health(row: sqlite3.Row) -> Health:
    return Health(row["channel"], row["failing_since"], row["last_error"], row["last_ok"],
                  bool(row["down_alerted"]))


def record_failure(db: sqlite3.Connection, channel: str, now: float, error: str) -> None:
    db.execute("INSERT INTO channel_health (channel, failing_since, last_error) VALUES (?, ?, ?)"
               " ON CONFLICT (channel) DO UPDATE SET last_error = excluded.last_error,"
               " failing_since = COALESCE(failing_since, excluded.failing_since)", (channel, now, error))


def record_success(db: sqlite3.Connection, channel: str, now: float) -> Health | None:
    """Mark `channel` healthy; returns its former health if the others had been told it was down."""
    row = db.execute("SELECT * FROM channel_health WHERE channel = ?", (channel,)).fetchone()
    db.execute("INSERT INTO channel_health (channel, last_ok) VALUES (?, ?) ON CONFLICT (channel) DO UPDATE"
               " SET failing_since = NULL, last_error = NULL, last_ok = excluded.last_ok, down_alerted = 0",
               (channel, now))
    return _health(row) if row is not None and row["down_alerted"] else None


def to_announce(db: sqlite3.Connection, now: float, down_after: float) -> list[Health]:
    """Channels failing for at least `down_after` that the others have not been told about."""
    rows = db.execute("SELECT * FROM channel_health WHERE failing_since IS NOT NULL AND down_alerted = 0"
                      " AND failing_since <= ? ORDER BY channel", (now - down_after,)).fetchall()
    return [_health(r) for r in rows]


def mark_announced(db: sqlite3.Connection, channel: str) -> None:
    db.execute("UPDATE channel_health SET down_alerted = 1 WHERE channel = ?", (channel,))


def listing(db: sqlite3.Connection) -> list[Health]:
    return [_health(r) for r in db.execute("SELECT * FROM channel_health ORDER BY channel").fetchall()]
