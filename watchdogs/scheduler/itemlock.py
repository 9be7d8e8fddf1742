"""One run of an item at a time across processes: an flock per item in the state dir.

The scheduler instance, a `run --once` beside it and a second `run --once` started at the
same moment all share the state directory, so they share these locks. A run holds its
item's lock from start to result (for a *.slurm drop-in, until the submitted job id is
recorded, so the next process sees it); an item whose lock is held elsewhere is skipped
and reported as such. The kernel drops the lock however the holder ends (even SIGKILL).
On a filesystem that cannot lock, items run unlocked (the scheduler lock warns already).
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
from pathlib import Path
from urllib.parse import quote

from watchdogs.ownfiles import make_dirs
from watchdogs.scheduler.lock import take_flock

LOG = logging.getLogger("watchdogs.scheduler")

LOCKS_DIR = "locks"
_MAX_NAME = 200


def lock_path(state_dir: Path, item_id: str) -> Path:
    """A file name for any item id ("cron.hourly/x", a check name with spaces...)."""
    name = quote(item_id, safe="")
    if len(name) > _MAX_NAME:
        name = name[:80] + "-" + hashlib.sha256(item_id.encode()).hexdigest()[:32]
    return state_dir / LOCKS_DIR / f"{name}.lock"


class ItemLocks:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self._held: dict[str, int] = {}

    def acquire(self, item_id: str) -> str | None:
        """None when we hold the item's lock now (or locking is unsupported here); else who
        holds it."""
        path = lock_path(self.state_dir, item_id)
        try:
            make_dirs(path.parent)
            fd, holder = take_flock(path, f"pid {os.getpid()} on {socket.gethostname()}")
        except OSError as exc:
            # A full or broken state directory must not stop the checks: the item runs
            # unlocked, and the state directory's own alert says what is wrong with it.
            LOG.warning("item %s runs without its lock: %s", item_id, exc)
            return None
        if fd is not None:
            self._held[item_id] = fd
        return holder

    def fd(self, item_id: str) -> int | None:
        """The open lock file of an item we hold (None when unlocked), for a child to inherit."""
        return self._held.get(item_id)

    def release(self, item_id: str) -> None:
        fd = self._held.pop(item_id, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)
