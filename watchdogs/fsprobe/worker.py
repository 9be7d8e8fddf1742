"""The child side of watchdogs.fsprobe.bounded (`bounded.BOOT` calls `main(OP, JSON)`).

Prints {"result": ...} or {"error": "..."} and exits at once with os._exit, so a scan
thread stuck on a dead mount cannot keep this process alive after it has answered.
Each operation imports what it needs when it runs: this process starts for every probe,
and a statvfs needs none of the scan's or trainguard's modules.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import sys

from watchdogs.fsprobe import DEFAULT_WORKERS

# Not `from typing import TYPE_CHECKING`: importing typing is ~3 ms of a process started for
# every probe; mypy reads a module-level TYPE_CHECKING = False as true all the same.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAGIC_GLOB = ("*", "?", "[")
# A heartbeat record is a few hundred bytes: more is not one.
HEARTBEAT_LIMIT = 1 << 20


def op_statvfs(path: str) -> dict[str, int]:
    """Like df: used = total - free; capacity = used + available-to-users."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return {"bytes_used": used, "bytes_total": used + st.f_bavail * st.f_frsize,
            "inodes_used": st.f_files - st.f_ffree, "inodes_total": st.f_files}


def op_newest(pattern: str, tail_bytes: int = 0, special: str = "raise") -> dict[str, Any] | None:
    """The newest regular file matching `pattern` (a path or a glob), its mtime, size, and
    tail. A match that is a FIFO, socket, directory or device is never opened (a FIFO would
    block this probe until it timed out, read as "filesystem not responding"): it is skipped
    when a regular file matches too, else named. `special`: "raise" (NotRegular, naming the
    kind) or "report" (the answer says {"path", "kind"} and nothing more)."""
    import glob

    from watchdogs.filekind import NotRegular, kind_words

    paths = glob.glob(pattern) if any(c in pattern for c in MAGIC_GLOB) else [pattern]
    stats, odd = [], []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            stats.append((st.st_mtime, path, st.st_size, st.st_uid))
        else:
            odd.append((st.st_mtime, path, kind_words(st.st_mode)))
    if not stats:
        if not odd:
            return None
        _mtime, path, kind = max(odd)
        if special == "report":
            return {"path": path, "kind": kind}
        raise NotRegular(path, kind)
    mtime, path, size, uid = max(stats)
    if tail_bytes <= 0:
        return {"path": path, "mtime": mtime, "size": size, "uid": uid, "tail": ""}
    data, size = _tail(path, tail_bytes)
    return {"path": path, "mtime": mtime, "size": size, "uid": uid,
            "tail": data.decode("utf-8", errors="replace")}


def _tail(path: str, tail_bytes: int) -> tuple[bytes, int]:
    # Opened without blocking and judged on the open descriptor: the file may have been
    # swapped for a FIFO since the stat above.
    from watchdogs.filekind import read_tail

    return read_tail(path, tail_bytes)


def op_heartbeats(directory: str) -> list[dict[str, Any]]:
    """trainguard's per-rank records in `directory`, read as trainguard.heartbeat.read_heartbeats
    does, but each file only when it is a regular file: a `rank-0.json` that is a FIFO is
    skipped like an unreadable record, not a probe blocked until "not responding"."""
    # Imported here: the trainguard package pulls in psutil and more (~0.1-0.4 s), which
    # every other probe (statvfs, scan) would otherwise pay at each start.
    import glob
    from dataclasses import asdict

    from trainguard.heartbeat import Heartbeat
    from watchdogs.filekind import NotRegular, kind_words

    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return []  # not made yet (the training has not started): no records, as before
    if not stat.S_ISDIR(st.st_mode):
        raise NotRegular(directory, kind_words(st.st_mode), "a folder")
    records = []
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "rank-*.json"))):
        try:
            records.append(Heartbeat.from_dict(json.loads(_read(path))))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return [asdict(h) for h in sorted(records, key=lambda r: r.rank)]


def _read(path: str) -> bytes:
    from watchdogs.filekind import read_regular

    return read_regular(path, HEARTBEAT_LIMIT)


def op_scan(root: str, time_limit: float, workers: int = DEFAULT_WORKERS) -> dict[str, Any]:
    from dataclasses import asdict

    from watchdogs.fsprobe.scan import scan_tree
    return asdict(scan_tree(root, time_limit, workers))


def op_newest_entry(directory: str) -> str | None:
    """The most recently modified entry (a checkpoint file or folder) of `directory`."""
    entries = [(e.stat().st_mtime, e.path) for e in os.scandir(directory)
               if not e.name.startswith(".")]
    return max(entries)[1] if entries else None


def op_answers(paths: list[str]) -> int:
    """Stat each path, or its nearest existing parent, as the config's checks will: returns
    once every filesystem on the way has answered (the caller's deadline is the point)."""
    for path in paths:
        where = os.path.normpath(path)
        while not os.path.lexists(where) and where != os.path.dirname(where):
            where = os.path.dirname(where)
        with contextlib.suppress(OSError):
            os.stat(where)
    return len(paths)


OPS: dict[str, Callable[..., Any]] = {"statvfs": op_statvfs, "newest": op_newest, "heartbeats": op_heartbeats,
       "scan": op_scan, "newest_entry": op_newest_entry, "answers": op_answers}


def main(argv: list[str]) -> None:
    try:
        reply = {"result": OPS[argv[0]](**json.loads(argv[1]))}
    except OSError as exc:
        reply = {"error": f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")}
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        reply = {"error": f"bad probe request: {type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(reply))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
