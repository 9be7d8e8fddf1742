"""The persistent outbox: rendered messages waiting for their channel.

An item is written in the same transaction as the alert state that caused it, so a
`kill -9` leaves either both or neither. Delivery claims the item with a lease (so a second
process, e.g. a manual `run --once` beside the scheduler, cannot send it too), sends, and
marks it delivered in its own transaction right after the channel accepted it.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass

from notifiers.base import Message

BASE_BACKOFF = 30.0
MAX_BACKOFF = 3600.0


@dataclass(frozen=True)
class OutboxItem:
    id: int
    key: str
    channel: str
    message: Message
    created: float
    attempts: int
    next_attempt: float
    last_error: str | None
    done: tuple[str, ...]
    lease_until: float | None = None
    lease_owner: str | None = None
    """"host:pid:tag@since" of the process that holds the lease (see `claim`)."""

    def holder(self, now: float) -> tuple[str, int, float] | None:
        """(host, pid, since) of the process sending this item now; None when no lease
        runs. A killed sender's lease runs out at `lease_until`, then it is retried."""
        if self.lease_until is None or self.lease_until <= now or not self.lease_owner:
            return None
        who, _, since = self.lease_owner.rpartition("@")
        host, _, rest = who.partition(":")
        try:
            return host, int(rest.split(":")[0]), float(since)
        except ValueError:
            return None


def encode(message: Message) -> str:
    data = asdict(message)
    data["extra"] = dict(message.extra)
    return json.dumps(data, sort_keys=True)


def decode(text: str) -> Message:
    data = json.loads(text)
    data["done"] = tuple(data.get("done", ()))
    return Message(**data)


def backoff(attempts: int, permanent: bool = False, retry_after: float | None = None) -> float:
    """Seconds until the next try after `attempts` failed ones: 30 s doubling to an hour;
    an hour at once when the error looks permanent (it is still retried: a fixed password
    file or address must not need anyone to re-queue anything); at least Retry-After."""
    wait = MAX_BACKOFF if permanent else min(MAX_BACKOFF, BASE_BACKOFF * 2 ** max(attempts - 1, 0))
    return max(wait, retry_after or 0.0)


def enqueue(db: sqlite3.Connection, channel: str, message: Message, now: float) -> bool:
    """False if a message with this key is already queued (the same tick handled twice)."""
    cursor = db.execute("INSERT OR IGNORE INTO outbox (key, channel, message, created, next_attempt)"
                        " VALUES (?, ?, ?, ?, ?)", (message.key, channel, encode(message), now, now))
    return cursor.rowcount == 1


def _item(row: sqlite3.Row) -> OutboxItem:
    return OutboxItem(row["id"], row["key"], row["channel"], decode(row["message"]), row["created"],
                      row["attempts"], row["next_attempt"], row["last_error"], tuple(json.loads(row["done"])),
                      row["lease_until"], row["lease_owner"])


def due(db: sqlite3.Connection, now: float, force: bool = False) -> list[OutboxItem]:
    """Undelivered, unleased items whose backoff has passed (all when `force`), oldest first."""
    rows = db.execute("SELECT * FROM outbox WHERE delivered IS NULL"
                      " AND (lease_until IS NULL OR lease_until <= ?)"
                      " AND (? OR next_attempt <= ?) ORDER BY id", (now, int(force), now)).fetchall()
    return [_item(r) for r in rows]


def pending(db: sqlite3.Connection) -> list[OutboxItem]:
    rows = db.execute("SELECT * FROM outbox WHERE delivered IS NULL ORDER BY id").fetchall()
    return [_item(r) for r in rows]


def claim(db: sqlite3.Connection, item_id: int, owner: str, now: float, until: float) -> bool:
    """Take the item for one delivery attempt; False if someone else holds it or it went.
    The owner is stored with the moment it took the lease, for `watchdogs alerts`."""
    cursor = db.execute("UPDATE outbox SET lease_until = ?, lease_owner = ? WHERE id = ?"
                        " AND delivered IS NULL AND (lease_until IS NULL OR lease_until <= ?)",
                        (until, f"{owner}@{now:.3f}", item_id, now))
    return cursor.rowcount == 1


def mark_delivered(db: sqlite3.Connection, item_id: int, now: float) -> None:
    db.execute("UPDATE outbox SET delivered = ?, lease_until = NULL, attempts = attempts + 1 WHERE id = ?",
               (now, item_id))


def mark_failed(db: sqlite3.Connection, item: OutboxItem, now: float, error: str, wait: float,
                done: tuple[str, ...]) -> None:
    db.execute("UPDATE outbox SET attempts = attempts + 1, next_attempt = ?, last_error = ?,"
               " lease_until = NULL, done = ? WHERE id = ?",
               (now + wait, error, json.dumps(sorted(set(item.done) | set(done))), item.id))


def prune(db: sqlite3.Connection, before: float) -> None:
    db.execute("DELETE FROM outbox WHERE delivered IS NOT NULL AND delivered < ?", (before,))
