"""The state view: a copy of the state database that the chain writes each tick, which
every other process (on any host) reads instead of the live database.

Why: the live database is in WAL mode, and WAL needs every process that touches it on one
host (its `-shm` index is shared memory; even a reader writes into it). On NFS or Lustre the
chain writes on a compute node while `status` runs on a login node. So the chain is the one
writer and reader of the live database, and publishes a view: SQLite's backup API into a
temporary file in rollback-journal mode, fsync, rename over `view.sqlite3`, fsync the
folder. A reader opens the view with `immutable=1`: no lock, no journal, no `-shm`, no
write of any kind, which any filesystem serves (also a full one), and a rename never shows
half a file. The view carries when, where and by whom it was taken, so `status` says how
fresh it is.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from watchdogs import ownfiles
from watchdogs.errors import WatchdogsError
from watchdogs.state.store import CORRUPT, DB_NAME, StateStore, StateUnavailable, state_problem

VIEW_NAME = "view.sqlite3"
_META = "CREATE TABLE IF NOT EXISTS view_meta (taken REAL, host TEXT, pid INTEGER, writer TEXT)"


@dataclass(frozen=True)
class ViewInfo:
    taken: float
    host: str
    pid: int
    writer: str
    """"chain instance 12", "silence (applied directly)", ..."""


def publish(store: StateStore, writer: str, now: float | None = None) -> Path:
    """Write the view of `store` atomically; returns its path. Raises sqlite3/OS errors
    (the caller decides what a full or broken state folder means)."""
    import socket  # here, not above: `status` reads views and needs no socket module

    target = store.state_dir / VIEW_NAME
    # mkstemp (exclusive, random name, 0600), closed, then filled by SQLite by name: the
    # state folder is private, so the name cannot be swapped in between.
    fd, name = ownfiles.temp_beside(target, 0o600)
    os.close(fd)
    temp = Path(name)
    try:
        dest = sqlite3.connect(temp, isolation_level=None)
        try:
            store.connection().backup(dest)
            dest.execute("PRAGMA journal_mode=DELETE")
            dest.execute(_META)
            dest.execute("DELETE FROM view_meta")
            dest.execute("INSERT INTO view_meta VALUES (?, ?, ?, ?)",
                         (time.time() if now is None else now, socket.gethostname(), os.getpid(), writer))
        finally:
            dest.close()
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _fsync_dir(store.state_dir)
    return target


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a folder; the rename stands
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class ViewStore(StateStore):
    """The view, read-only: the same tables and queries as the live store, no writes."""

    def __init__(self, path: Path, immutable: bool = True) -> None:
        # No schema work, as StateStore.__init__ does: nothing may be written.
        self.state_dir = path.parent
        self.path = path
        self.immutable = immutable
        self._busy_timeout = 0.0
        import threading

        self._local = threading.local()

    def _connect(self) -> sqlite3.Connection:
        if self.immutable:  # the view: never opened by SQLite unless it is a whole regular file
            found = inspect(self.path)
            if found is not None:
                raise StateUnavailable(CORRUPT, self.path.parent, found.words)
        uri = f"file:{quote(str(self.path))}?mode=ro" + ("&immutable=1" if self.immutable else "")
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None)
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise _unreadable(self.path, exc) from None
        conn.row_factory = sqlite3.Row
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        raise WatchdogsError(f"{self.path}: the state view is read-only (changes go to the chain)")
        yield  # pragma: no cover - a generator for the context manager's sake

    def ensure_schema(self, name: str, version: int, statements: Sequence[str]) -> None:
        return  # the view holds whatever the live database held; a missing table reads as empty

    def kv_put(self, namespace: str, key: str, value: Any) -> None:
        raise WatchdogsError(f"{self.path}: the state view is read-only")

    def info(self) -> ViewInfo | None:
        try:
            row = self.connection().execute("SELECT taken, host, pid, writer FROM view_meta").fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else ViewInfo(float(row[0]), str(row[1]), int(row[2]), str(row[3]))

    def has_table(self, name: str) -> bool:
        return self.connection().execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def _unreadable(path: Path, exc: BaseException) -> StateUnavailable:
    kind = state_problem(exc) or CORRUPT
    return StateUnavailable(kind, path.parent, f"the state view {path.name} cannot be read ({exc}); the "
                            "chain writes a new one each tick")


def open_view(state_dir: Path) -> ViewStore | None:
    """The view of `state_dir`, or None when none was ever written (then there is nothing
    recorded to show, or only a live database from before views existed). A view that is
    there but unusable (see `inspect`) raises StateUnavailable with the reason."""
    path = Path(state_dir) / VIEW_NAME
    if not os.path.lexists(path):  # lexists: a dangling link is a bad view, not no view
        return None
    store = ViewStore(path)
    store.connection()
    return store


def legacy_store(state_dir: Path) -> StateStore | None:
    """A database written before views existed and no view beside it: read it in place
    (read-only, so a full disk still answers)."""
    path = Path(state_dir) / DB_NAME
    if not path.exists():
        return None
    view = ViewStore(path, immutable=False)  # its WAL holds the newest pages: not immutable
    with contextlib.suppress(StateUnavailable):
        view.connection()
        return view
    return None


# -- reading it safely: what is at the view's path, before SQLite opens it ----------------

SQLITE_MAGIC = b"SQLite format 3\x00"
REQUIRED = ("view_meta", "sched_instances", "alert_state", "outbox")
"""Tables every view holds: publish writes view_meta, and every writer (the scheduler, a
command, `run --once`) has made the scheduler's and the alerts' tables before it publishes."""


@dataclass(frozen=True)
class ViewProblem:
    """Why the view cannot be trusted to say what the state is."""

    path: Path
    kind: str
    """"special" (not a regular file: a FIFO, a folder, a link), "empty", "damaged",
    "unreadable" (permissions, I/O)."""
    words: str

    @property
    def replaced(self) -> bool:
        """Something other than the writer put it there (the writer only renames regular
        files over it): worse than a damaged file."""
        return self.kind == "special"


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def inspect(path: Path) -> ViewProblem | None:
    """None when `path` is a whole regular SQLite file (or absent: nothing to say); else the
    problem. Never blocks: the path is looked at with lstat and opened O_NONBLOCK without
    following a link, so a FIFO or a device there is named, not opened by SQLite (which
    would wait forever on a FIFO). Reads the 100-byte header: an empty file, another
    format, or a file shorter than its header says (cut off) is refused before any query."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return ViewProblem(path, "unreadable", f"the state view {path} cannot be looked at ({exc.strerror})")
    if not stat.S_ISREG(st.st_mode):
        return ViewProblem(path, "special", f"the state view {path} is {_kind(st.st_mode)}, not a regular "
                           "file: the scheduler never makes one; remove it (the chain writes a new view "
                           "each tick)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return ViewProblem(path, "unreadable", f"the state view {path} cannot be opened ({exc.strerror})")
    try:
        opened = os.fstat(fd)
        header = os.pread(fd, 100, 0)
    except OSError as exc:
        return ViewProblem(path, "unreadable", f"the state view {path} cannot be read ({exc.strerror})")
    finally:
        os.close(fd)
    if not stat.S_ISREG(opened.st_mode):  # swapped between lstat and open
        return ViewProblem(path, "special",
                           f"the state view {path} is {_kind(opened.st_mode)}, not a regular file")
    return _header_problem(path, header, opened.st_size)


def _header_problem(path: Path, header: bytes, size: int) -> ViewProblem | None:
    if size == 0:
        return ViewProblem(path, "empty", f"the state view {path} is empty (0 bytes): it was not written "
                           "by the scheduler, or cut off; the chain writes a new one each tick")
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        return ViewProblem(path, "damaged", f"the state view {path} is not an SQLite database ({size} bytes)")
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # the in-header size counts only when these match
    if valid and page and pages and size < page * pages:
        return ViewProblem(path, "damaged",
                           f"the state view {path} is cut off: {size} of {page * pages} bytes")
    return None


def whole(view: ViewStore) -> ViewProblem | None:
    """After `inspect`: the tables every view holds, and who took it (view_meta)."""
    try:
        names = {str(r[0]) for r in view.connection().execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in REQUIRED if t not in names]
        if missing:
            return ViewProblem(view.path, "damaged", f"the state view {view.path} is damaged: no "
                               f"{', '.join(missing)} table")
        if view.info() is None:
            return ViewProblem(view.path, "damaged", f"the state view {view.path} is damaged: it does not "
                               "say when it was taken (view_meta is empty)")
        view.connection().execute("SELECT COUNT(*) FROM sched_instances").fetchone()
    except (sqlite3.Error, StateUnavailable) as exc:
        return ViewProblem(view.path, "damaged", f"the state view {view.path} cannot be read ({exc})")
    return None


def problem_of(state_dir: Path) -> ViewProblem | None:
    """What is wrong with the view of `state_dir` (`inspect`, then `whole`); None when it
    is fine or there is none. Never blocks, never writes."""
    path = Path(state_dir) / VIEW_NAME
    found = inspect(path)
    if found is not None or not os.path.lexists(path):
        return found
    view = ViewStore(path)
    try:
        return whole(view)
    finally:
        view.close()
