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
import errno
import fcntl
import hashlib
import os
import socket
from pathlib import Path
from urllib.parse import quote

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
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            return holder
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                return None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode())
        self._held[item_id] = fd
        return None

    def release(self, item_id: str) -> None:
        fd = self._held.pop(item_id, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)
