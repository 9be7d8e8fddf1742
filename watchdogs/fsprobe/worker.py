"""The child side of watchdogs.fsprobe.bounded (`bounded.BOOT` calls `main(OP, JSON)`).

Prints {"result": ...} or {"error": "..."} and exits at once with os._exit, so a scan
thread stuck on a dead mount cannot keep this process alive after it has answered.
Each operation imports what it needs when it runs: this process starts for every probe,
and a statvfs needs none of the scan's or trainguard's modules.
"""
from __future__ import annotations

import json
import os
import sys

from watchdogs.fsprobe import DEFAULT_WORKERS

# Not `from typing import TYPE_CHECKING`: importing typing is ~3 ms of a process started for
# every probe; mypy reads a module-level TYPE_CHECKING = False as true all the same.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAGIC_GLOB = ("*", "?", "[")


def op_statvfs(path: str) -> dict[str, int]:
    """Like df: used = total - free; capacity = used + available-to-users."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return {"bytes_used": used, "bytes_total": used + st.f_bavail * st.f_frsize,
            "inodes_used": st.f_files - st.f_ffree, "inodes_total": st.f_files}


def op_newest(pattern: str, tail_bytes: int = 0) -> dict[str, Any] | None:
    """The newest file matching `pattern` (a path or a glob), its mtime, size, and tail."""
    import glob

    paths = glob.glob(pattern) if any(c in pattern for c in MAGIC_GLOB) else [pattern]
    stats = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        stats.append((st.st_mtime, path, st.st_size))
    if not stats:
        return None
    mtime, path, size = max(stats)
    return {"path": path, "mtime": mtime, "size": size, "tail": _tail(path, size, tail_bytes)}


def _tail(path: str, size: int, tail_bytes: int) -> str:
    if tail_bytes <= 0:
        return ""
    with open(path, "rb") as fh:
        fh.seek(max(0, size - tail_bytes))
        return fh.read(tail_bytes).decode("utf-8", errors="replace")


def op_heartbeats(directory: str) -> list[dict[str, Any]]:
    # Imported here: the trainguard package pulls in psutil and more (~0.1-0.4 s), which
    # every other probe (statvfs, scan) would otherwise pay at each start.
    from dataclasses import asdict
    from pathlib import Path

    from trainguard.heartbeat import read_heartbeats
    return [asdict(h) for h in read_heartbeats(Path(directory))]


def op_scan(root: str, time_limit: float, workers: int = DEFAULT_WORKERS) -> dict[str, Any]:
    from dataclasses import asdict

    from watchdogs.fsprobe.scan import scan_tree
    return asdict(scan_tree(root, time_limit, workers))


def op_newest_entry(directory: str) -> str | None:
    """The most recently modified entry (a checkpoint file or folder) of `directory`."""
    entries = [(e.stat().st_mtime, e.path) for e in os.scandir(directory)
               if not e.name.startswith(".")]
    return max(entries)[1] if entries else None


OPS: dict[str, Callable[..., Any]] = {"statvfs": op_statvfs, "newest": op_newest, "heartbeats": op_heartbeats,
       "scan": op_scan, "newest_entry": op_newest_entry}


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
