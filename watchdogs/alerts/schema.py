"""The alert subsystem's tables in the state database."""
from __future__ import annotations

from watchdogs.state.store import StateStore

NAME = "alerts"
VERSION = 1

DDL = (
    # One row per item (check or drop-in): the last reading and what was announced.
    "CREATE TABLE IF NOT EXISTS alert_state (item TEXT PRIMARY KEY, kind TEXT NOT NULL,"
    " status TEXT NOT NULL, summary TEXT NOT NULL, since REAL, bad_streak INTEGER NOT NULL,"
    " status_streak INTEGER NOT NULL, fingerprint TEXT NOT NULL, notified TEXT NOT NULL,"
    " notified_fingerprint TEXT NOT NULL, last_notified REAL, acked_at REAL, acked_by TEXT,"
    " muted INTEGER NOT NULL, updated REAL NOT NULL)",
    # Every event, sent or withheld by a silence (silenced_by names the silence).
    "CREATE TABLE IF NOT EXISTS alert_log (id INTEGER PRIMARY KEY, at REAL NOT NULL, item TEXT NOT NULL,"
    " state TEXT NOT NULL, status TEXT NOT NULL, summary TEXT NOT NULL, channels TEXT NOT NULL,"
    " silenced_by INTEGER)",
    "CREATE INDEX IF NOT EXISTS alert_log_at ON alert_log (at)",
    # The persistent outbox: one rendered message per (tick, channel); `key` is idempotency.
    "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE,"
    " channel TEXT NOT NULL, message TEXT NOT NULL, created REAL NOT NULL,"
    " attempts INTEGER NOT NULL DEFAULT 0, next_attempt REAL NOT NULL, last_error TEXT,"
    " lease_until REAL, lease_owner TEXT, delivered REAL, done TEXT NOT NULL DEFAULT '[]')",
    "CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (delivered, next_attempt)",
    "CREATE TABLE IF NOT EXISTS silences (id INTEGER PRIMARY KEY, pattern TEXT NOT NULL,"
    " starts REAL NOT NULL, ends REAL NOT NULL, reason TEXT NOT NULL, author TEXT NOT NULL,"
    " created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS channel_health (channel TEXT PRIMARY KEY, failing_since REAL,"
    " last_error TEXT, last_ok REAL, down_alerted INTEGER NOT NULL DEFAULT 0)",
)


def ensure(store: StateStore) -> StateStore:
    store.ensure_schema(NAME, VERSION, DDL)
    return store
