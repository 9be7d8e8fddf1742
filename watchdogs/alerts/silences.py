"""Silences: a glob of item names muted until a time, with a reason and an author.
Silenced events are still recorded (alert_log.silenced_by), just not sent."""
from __future__ import annotations

import fnmatch
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Silence:
    id: int
    pattern: str
    starts: float
    ends: float
    reason: str
    author: str
    created: float

    def matches(self, item: str) -> bool:
        return fnmatch.fnmatchcase(item, self.pattern)

    def active(self, now: float) -> bool:
        return self.starts <= now < self.ends


def add(db: sqlite3.Connection, pattern: str, starts: float, ends: float, reason: str,
        author: str, created: float | None = None) -> Silence:
    """`created`: when the command asking for it was written (the sender's clock; its
    identity when the same command is applied twice), else `starts`."""
    created = starts if created is None else created
    cursor = db.execute("INSERT INTO silences (pattern, starts, ends, reason, author, created)"
                        " VALUES (?, ?, ?, ?, ?, ?)", (pattern, starts, ends, reason, author, created))
    return Silence(int(cursor.lastrowid or 0), pattern, starts, ends, reason, author, created)


def listing(db: sqlite3.Connection, now: float, include_expired: bool = False) -> list[Silence]:
    query = "SELECT * FROM silences" + ("" if include_expired else " WHERE ends > ?") + " ORDER BY id"
    rows = db.execute(query, () if include_expired else (now,)).fetchall()
    return [Silence(**dict(row)) for row in rows]


def expire(db: sqlite3.Connection, silence_id: int, now: float) -> bool:
    """End a silence now. False if there is no such silence still running."""
    return db.execute("UPDATE silences SET ends = ? WHERE id = ? AND ends > ?",
                      (now, silence_id, now)).rowcount == 1


def silencing(silences: Sequence[Silence], item: str, now: float) -> Silence | None:
    return next((s for s in silences if s.active(now) and s.matches(item)), None)


def prune(db: sqlite3.Connection, before: float) -> None:
    db.execute("DELETE FROM silences WHERE ends < ?", (before,))
