"""What a fresh start keeps from a corrupt state database, and says it lost.

The tables that carry promises to people are read row by row from the file moved aside:
undelivered messages (the outbox), silences and the alerts still open. Whatever SQLite can
still read is copied into the fresh database (with the table's own definition); the rest is
counted as lost, and the alert about the corrupt database says which. Run history, check
memory and drop-in logs are not carried over: the next runs rebuild them.
"""
from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from urllib.parse import quote

# (table, rows that matter, what a reader calls them)
KEPT = (("outbox", "delivered IS NULL", "undelivered message(s)"),
        ("silences", "1 = 1", "silence(s)"),
        ("alert_state", "notified != 'OK'", "open alert(s)"))


def salvage(old: Path, fresh: sqlite3.Connection) -> str:
    """Copy what can be read; returns one sentence for the alert."""
    kept, lost = [], []
    try:
        src = sqlite3.connect(f"file:{quote(str(old))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return (f"nothing could be read from it ({exc}): open alerts, silences and undelivered "
                "messages are lost")
    try:
        for table, where, words in KEPT:
            copied, failed = _copy(src, fresh, table, where)
            if copied:
                kept.append(f"{copied} {words}")
            if failed:
                lost.append(f"{words} ({failed})")
    finally:
        src.close()
    said = f"kept {', '.join(kept)}" if kept else "kept nothing"
    return said + (f"; lost: {'; '.join(lost)}" if lost else "; nothing else was lost but run history")


def _copy(src: sqlite3.Connection, fresh: sqlite3.Connection, table: str, where: str) -> tuple[int, str]:
    try:
        ddl = src.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                          (table,)).fetchone()
    except sqlite3.Error as exc:
        return 0, f"the table list is unreadable: {exc}"
    if ddl is None:
        return 0, ""
    try:
        fresh.execute(str(ddl[0]).replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1))
        columns = [r[1] for r in fresh.execute(f"PRAGMA table_info({table})")]
    except sqlite3.Error as exc:
        return 0, f"cannot recreate it: {exc}"
    copied, failed = 0, ""
    ids: list[int] = []
    try:
        ids = [int(r[0]) for r in src.execute(f"SELECT rowid FROM {table} WHERE {where}")]
    except sqlite3.Error as exc:
        failed = f"the table is unreadable: {exc}"
    names = ", ".join(columns)
    marks = ", ".join("?" for _ in columns)
    unreadable = 0
    for rowid in ids:
        try:
            row = src.execute(f"SELECT {names} FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
            with contextlib.suppress(sqlite3.IntegrityError):
                fresh.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", tuple(row))
                copied += 1
        except sqlite3.Error:
            unreadable += 1
    if unreadable:
        failed = f"{unreadable} row(s) unreadable"
    return copied, failed
