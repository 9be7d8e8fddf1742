"""A checkpoint folder's completeness marker, `COMPLETE.json`: written last, after every
file and the folder are fsynced, listing every file and its size; a folder is complete when
the marker exists and every file has the size it lists. Used by trainguard.checkpoints.checkpoint's
commit and by the integrations that let a framework fill and name the folder itself.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from trainguard._files import write_atomic

MARKER = "COMPLETE.json"


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _files(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != MARKER}


def _fsync_tree(directory: Path) -> None:
    for path in sorted(directory.rglob("*"), reverse=True):
        fsync_path(path)
    fsync_path(directory)


def is_complete(path: Path) -> bool:
    """The marker exists and every file it lists has the size it lists."""
    return damage(path) is None


def damage(path: Path) -> str | None:
    """Why the checkpoint folder `path` is not complete, or None when it is."""
    try:
        marker = json.loads((path / MARKER).read_text())
        files = marker["files"].items()
    except FileNotFoundError:
        return f"has no {MARKER} (the save was cut off)"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"has an unreadable {MARKER} ({type(exc).__name__})"
    for name, size in files:
        try:
            found = (path / name).stat().st_size
        except OSError:
            return f"misses {name}"
        if found != size:
            return f"has {name} truncated ({found} of {size} bytes)"
    return None


def mark_complete(directory: Path, step: int) -> None:
    """fsync every file of `directory`, then write the completeness marker (also for a
    directory a framework filled and named itself, e.g. the HF Trainer's checkpoint-N)."""
    # Data first, marker last: after a crash the marker never names a file not on disk.
    _fsync_tree(directory)
    marker = {"step": step, "time": time.time(), "files": _files(directory)}
    write_atomically(directory / MARKER, json.dumps(marker))
    fsync_path(directory)


def write_atomically(target: Path, text: str) -> None:
    # mkstemp (never a planted name), fsync (the marker must be on disk before it is trusted).
    write_atomic(target, text, 0o644, fsync=True)
