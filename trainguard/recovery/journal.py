"""The run folder's recovery journal: `<run_dir>/recovery/<host>.jsonl`.

One JSON object per line, each with a `text` field that says the event in words, so `cat`
is enough to read it. Every process appends to the file named for its own host, with one
`write()` of one line under PIPE_BUF and O_APPEND: on NFS, appends from *different* clients
to one file can overwrite each other (the client computes the end of file itself), while
appends from one client are serialised by its inode lock. Readers merge all files by time.

Reading never raises: an unreadable file or a line that is not a whole record is reported
in `Journal.problems` and left out (a corrupt line never becomes a suspect or a restart).
"""
from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainguard import _files, _text

FOLDER = "recovery"
LINE_MAX = 3800     # bytes; below PIPE_BUF (4096) with room for the newline
VERSION = 1


@dataclass(frozen=True)
class Entry:
    kind: str                  # "suspect", "restart", "plan", "storm"
    at: float
    fields: Mapping[str, Any]
    text: str
    origin: str                # "<file>:<line>", for messages


@dataclass(frozen=True)
class Journal:
    entries: tuple[Entry, ...]
    problems: tuple[str, ...]  # "<file>:<line>: <why>" for every line or file left out

    def of(self, kind: str) -> list[Entry]:
        return [e for e in self.entries if e.kind == kind]


def folder(run_dir: Path) -> Path:
    return Path(run_dir) / FOLDER


def clock_text(at: float) -> str:
    """ValueError for a time that is no time (NaN, infinite, beyond the calendar)."""
    if not math.isfinite(at):
        raise ValueError(f"{at}: not a time")
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
    except (OverflowError, OSError) as exc:
        raise ValueError(f"{at}: not a time ({exc})") from exc


def append(run_dir: Path, kind: str, at: float, text: str, fields: Mapping[str, Any]) -> None:
    """Append one entry; OSError when the folder cannot take it (the caller says so),
    ValueError for a time that is no time. Text from outside (a hang frame's path, a
    detail given on the command line) is written with its undecodable bytes as `\\xNN`."""
    data = _text.clean({"v": VERSION, "kind": kind, "at": round(at, 3), **fields,
                        "text": f"{clock_text(at)} {text}"})
    line = json.dumps(data, sort_keys=False) + "\n"
    if len(line.encode()) > LINE_MAX:   # only the prose can be long: cut it, keep the facts
        over = len(line.encode()) - LINE_MAX + 3
        data["text"] = data["text"][: max(0, len(data["text"]) - over)] + "..."
        line = json.dumps(data) + "\n"
    target = folder(run_dir)
    _files.make_dirs(target, 0o755)
    _files.append_line(target / f"{_host()}.jsonl", line.encode())


def _host() -> str:
    # The name the record's readers know the node by; "/" cannot be in a node name.
    return (os.environ.get("SLURMD_NODENAME") or socket.gethostname()).replace("/", "_")


def read(run_dir: Path) -> Journal:
    """Every readable entry of every host's file, oldest first."""
    base = folder(run_dir)
    try:
        files = sorted(p for p in base.iterdir() if p.name.endswith(".jsonl"))
    except FileNotFoundError:
        return Journal((), ())
    except OSError as exc:
        return Journal((), (f"{base}: cannot list: {exc.strerror or exc}",))
    entries: list[Entry] = []
    problems: list[str] = []
    for path in files:
        try:
            untrusted = _untrusted(path)
            # surrogateescape, not "replace": a raw byte in a JSON string is kept, and parse()
            # shows it as `\\xNN` (a decoded `\\xNN` would be an invalid JSON escape)
            text = "" if untrusted else path.read_bytes().decode("utf-8", "surrogateescape")
        except OSError as exc:
            problems.append(f"{path}: cannot read: {exc.strerror or exc}")
            continue
        if untrusted:
            problems.append(f"{path}: {untrusted}: left out (it decides which nodes are excluded)")
            continue
        found, bad = parse(text, str(path))
        entries += found
        problems += bad
    entries.sort(key=lambda e: e.at)
    return Journal(tuple(entries), tuple(problems))


def _untrusted(path: Path) -> str:
    """Why a file others could have written is not read ("" when it is yours or root's and
    writable by its owner only)."""
    st = path.stat()
    if st.st_uid not in (os.getuid(), 0):
        return f"owned by uid {st.st_uid}, not by you"
    if st.st_mode & 0o022:
        return f"writable by others (mode {st.st_mode & 0o777:o})"
    return ""


def parse(text: str, name: str) -> tuple[list[Entry], list[str]]:
    entries, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        origin = f"{name}:{number}"
        try:
            data = _text.clean(json.loads(line))   # "\\udce9" in JSON is a lone surrogate
            at = float(data["at"])
            if not math.isfinite(at):
                raise ValueError(f"at={at}")
            entries.append(Entry(str(data["kind"]), at, data, str(data.get("text", "")), origin))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:   # a list, not an object
            problems.append(f"{origin}: not a whole record ({type(exc).__name__}): {line[:80]!r}")
    return entries, problems
