"""The state database: one SQLite file, WAL mode, a connection per thread.

Each subsystem owns its tables and creates them with `ensure_schema`.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from watchdogs.errors import WatchdogsError

DB_NAME = "state.sqlite3"

_BASE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS schema_versions (name TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kv (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
    " PRIMARY KEY (namespace, key))",
)


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (mode 0700) if needed; state and logs are nobody else's business."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


class StateStore:
    def __init__(self, state_dir: Path, busy_timeout: float = 30.0) -> None:
        self.state_dir = ensure_private_dir(Path(state_dir))
        self.path = self.state_dir / DB_NAME
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        with self.transaction() as db:
            for stmt in _BASE_SCHEMA:
                db.execute(stmt)

    def connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise WatchdogsError(f"{self.path}: cannot open state database: {exc}") from None
        conn.row_factory = sqlite3.Row
        os.chmod(self.path, 0o600)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT: writers queue up instead of failing half-way."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def ensure_schema(self, name: str, version: int, statements: Sequence[str]) -> None:
        """Run `statements` once per (name, version); they must be idempotent DDL."""
        with self.transaction() as db:
            row = db.execute("SELECT version FROM schema_versions WHERE name = ?", (name,)).fetchone()
            if row is not None and row["version"] >= version:
                return
            for stmt in statements:
                db.execute(stmt)
            db.execute("INSERT OR REPLACE INTO schema_versions (name, version) VALUES (?, ?)",
                       (name, version))

    def kv_get(self, namespace: str, key: str, default: Any = None) -> Any:
        row = self.connection().execute(
            "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)).fetchone()
        return default if row is None else json.loads(row["value"])

    def kv_put(self, namespace: str, key: str, value: Any) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO kv (namespace, key, value) VALUES (?, ?, ?)",
                       (namespace, key, json.dumps(value)))

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
