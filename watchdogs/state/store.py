"""The state database: one SQLite file, WAL mode, a connection per thread.

Each subsystem owns its tables and creates them with `ensure_schema`.
"""
from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from watchdogs.errors import WatchdogsError
from watchdogs.ownfiles import make_dirs

DB_NAME = "state.sqlite3"

_BASE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS schema_versions (name TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kv (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
    " PRIMARY KEY (namespace, key))",
)


FULL, CORRUPT, BROKEN = "full", "corrupt", "unwritable"
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class StateUnavailable(WatchdogsError):
    """The state directory cannot be used: `kind` is FULL, CORRUPT or BROKEN (I/O error,
    read-only, permissions). The scheduler keeps running without it and says so."""

    exit_code = 3

    def __init__(self, kind: str, state_dir: Path, detail: str) -> None:
        super().__init__(f"state directory {state_dir} {kind}: {detail}")
        self.kind = kind
        self.state_dir = state_dir
        self.detail = detail


def state_problem(exc: BaseException) -> str | None:
    """FULL, CORRUPT or BROKEN for an error that means the state directory is unusable;
    None for anything else (a programming error must not pass for a full disk)."""
    if isinstance(exc, StateUnavailable):
        return exc.kind
    if isinstance(exc, OSError):
        return FULL if exc.errno in _FULL_ERRNOS else BROKEN
    if isinstance(exc, sqlite3.Error):
        text = str(exc).lower()
        code = getattr(exc, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_FULL or "disk is full" in text or "no space" in text:
            return FULL
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "malformed" in text \
                or "not a database" in text:
            return CORRUPT
        if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
            return None  # another process holds it: waited for, not broken
        if isinstance(exc, (sqlite3.OperationalError, sqlite3.DatabaseError)):
            return BROKEN
    return None


def move_aside(path: Path, now: float | None = None) -> Path:
    """Rename a corrupt database (and its WAL/shm) out of the way, kept for inspection."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now))
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.rename(Path(f"{target}{suffix}"))
    return target


def open_store(state_dir: Path, busy_timeout: float = 30.0, check: bool = False
               ) -> tuple[StateStore, str | None]:
    """The state database; a corrupt one is moved aside and a fresh one started, with what
    could be read of its outbox, silences and open alerts. Returns the store and, when that
    happened, a note for the alert (what was kept, what was lost). `check`: run SQLite's
    quick_check too (once per instance start: corruption deep in the file shows there, not
    only when some later query meets the bad page). Raises StateUnavailable when the
    directory cannot hold a database at all (full, read-only)."""
    path = Path(state_dir) / DB_NAME
    try:
        store = StateStore(state_dir, busy_timeout)
        store.connection().execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        problem = store.quick_check() if check else None
        if problem is None:
            return store, None
        store.close()
        detail = f"quick_check: {problem}"
    except (sqlite3.Error, OSError, WatchdogsError) as exc:
        kind = state_problem(exc.__cause__ or exc) or state_problem(exc)
        if kind != CORRUPT:
            raise StateUnavailable(_full_or(kind or BROKEN, Path(state_dir)), Path(state_dir),
                                   _reason(exc)) from None
        detail = _reason(exc)
    try:
        kept = move_aside(path)
        store = StateStore(state_dir, busy_timeout)
        from watchdogs.state.salvage import salvage  # only on this rare path

        with store.transaction() as db:
            said = salvage(kept, db)
    except (sqlite3.Error, OSError, WatchdogsError) as exc:
        raise StateUnavailable(state_problem(exc) or BROKEN, Path(state_dir), _reason(exc)) from None
    return store, (f"the state database was corrupt ({detail}): moved aside to {kept}; started a fresh one; "
                   f"{said}")


def _full_or(kind: str, state_dir: Path) -> str:
    """SQLite says "disk I/O error" when it cannot create its WAL on a full disk: look."""
    try:
        return FULL if kind == BROKEN and os.statvfs(state_dir).f_bavail == 0 else kind
    except OSError:
        return kind


def _reason(exc: BaseException) -> str:
    return exc.strerror or str(exc) if isinstance(exc, OSError) else str(exc)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def ensure_private_dir(path: Path) -> Path:
    """Create `path` and its missing parents (each mode 0700, whatever the umask) if needed;
    state and logs are nobody else's business."""
    if not path.is_dir():
        make_dirs(path)
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
        self.identity = _identity(self.path)

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
            raise WatchdogsError(f"{self.path}: cannot open state database: {exc}") from exc
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
            conn.execute("COMMIT")
        except BaseException:
            # Also after a failed COMMIT (disk full): a transaction left open would make every
            # later BEGIN fail, and the state would never recover when space comes back.
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # the original error is the one to report
                    conn.execute("ROLLBACK")
            raise

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
        if row is None:
            return default
        import json  # here, not above: `status` reads no kv value and so loads no json

        return json.loads(row["value"])

    def kv_put(self, namespace: str, key: str, value: Any) -> None:
        import json

        text = json.dumps(value)
        row = self.connection().execute(
            "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)).fetchone()
        if row is not None and row["value"] == text:
            return  # unchanged: no transaction, no fsync (most checks remember the same each tick)
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO kv (namespace, key, value) VALUES (?, ?, ?)",
                       (namespace, key, text))

    def replaced(self) -> str | None:
        """Why the file this store opened is no longer the one at its path (deleted,
        replaced), or None. Connections keep the old file open and write into it unseen."""
        now = _identity(self.path)
        if now == self.identity:
            return None
        what = "deleted" if now is None else "replaced by another file"
        return (f"the state database {self.path} was {what} while the scheduler ran: the open alerts, "
                "silences and undelivered messages it held are lost; a fresh one is started")

    def quick_check(self) -> str | None:
        """SQLite's `PRAGMA quick_check` (every page, not the indexes' contents): None when
        the database is sound, else the first problem it names."""
        rows = self.connection().execute("PRAGMA quick_check(5)").fetchall()
        first = str(rows[0][0]) if rows else "no answer"
        return None if first == "ok" else "; ".join(str(r[0]) for r in rows)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
