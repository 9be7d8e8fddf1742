"""One scheduler per state directory: an flock on state_dir/scheduler.lock, held for the
instance's life and released by the kernel however the process ends (even SIGKILL).

In the chain, `--dependency=singleton` already keeps two instances from running; the lock
also catches a `watchdogs run` started by hand against the same state. On a filesystem
that cannot lock (some network mounts), it is skipped with a warning.
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path

from watchdogs.errors import WatchdogsError

LOCK_NAME = "scheduler.lock"
NOTE_MAX = 4096
"""How much of a held lock's note is read (an item lock's JSON note names its item)."""


COMMAND_NOTE = "command"
"""How a short holder's note begins (a login-node command applying a change, a home's run)."""
HOME_NOTE = "command run --once --home"
"""How a home's run's note begins (watchdogs.scheduler.home)."""
COMMAND_WAIT_S = 15.0
HOME_WAIT_S = 600.0
"""A home's run holds the lock while its due items run; their own timeouts end it sooner."""


def wait_for_holder(holder: str) -> float:
    """How long a starting scheduler waits for `holder` to let go: a command's moment, a
    home's run (it watches meanwhile; giving up would end the instance, and the chain would
    back off for nothing), never another scheduler (0: that one keeps the state)."""
    if holder.startswith(HOME_NOTE):
        return HOME_WAIT_S
    return COMMAND_WAIT_S if holder.startswith(COMMAND_NOTE) else 0.0


def take_flock(path: Path, note: str) -> tuple[int | None, str | None]:
    """Try an exclusive flock on `path` without waiting: (our fd, None) when taken, and `note`
    is written into the file for whoever finds it held; (None, holder's note) when another
    process holds it; (None, None) when this filesystem cannot lock at all (some network
    mounts), where callers rely on the job chain alone."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a planted link: never written through
            raise WatchdogsError(f"{path}: a symbolic link where the lock file belongs, refused (never "
                                 "followed); remove it if you did not make it") from None
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, NOTE_MAX).decode(errors="backslashreplace").strip() or "another process"
        os.close(fd)
        return None, holder
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ENOLCK, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            return None, None
        raise
    rewrite_note(fd, note)
    return fd, None


def rewrite_note(fd: int, note: str) -> None:
    """Replace the note of a lock we hold (whoever finds it held reads it)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, note.encode(), 0)
    except OSError:
        pass  # the note is only for a message; a full disk must not stop the run


class Lock:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, who: str) -> str | None:
        """None when held by us (or locking is unsupported here); else who holds it."""
        self._fd, holder = take_flock(self.path, f"{who} (pid {os.getpid()} on {socket.gethostname()})\n")
        return holder

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
