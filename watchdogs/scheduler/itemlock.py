"""One run of an item at a time across processes: an flock per item in the state dir.

The scheduler instance, a `run --once` beside it and a second `run --once` started at the
same moment all share the state directory, so they share these locks. A run holds its
item's lock from start to result (for a *.slurm drop-in, until the submitted job id is
recorded, so the next process sees it); an item whose lock is held elsewhere is skipped
and reported as such. The kernel drops the lock however the holder ends (even SIGKILL).
On a filesystem that cannot lock, items run unlocked (the scheduler lock warns already).

Every child a run starts inherits the lock (the drop-in's reaper, an sbatch or squeue run
for a check): a scheduler that crashes mid-run leaves its orphan holding the item, so a
restarted scheduler never starts the item beside it. The lock's note (JSON, `LockNote`)
names the run's scheduler and its latest child. A new scheduler that finds an item held
by a dead scheduler of this host waits for the orphan, and ends it (its process group:
TERM, then KILL) once it has run past its timeout plus `ORPHAN_GRACE_S`; an orphan of
another host is only waited for (its pids mean nothing here).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from watchdogs import humanize
from watchdogs.ownfiles import make_dirs
from watchdogs.procs import Holding
from watchdogs.scheduler.lock import rewrite_note, take_flock

LOG = logging.getLogger("watchdogs.scheduler")

LOCKS_DIR = "locks"
_MAX_NAME = 200
ORPHAN_GRACE_S = 5.0
"""An orphan is ended this long after its timeout: as long as a live scheduler gives a timed-out
run between SIGTERM and SIGKILL (dropins.execute.KILL_GRACE_S)."""
TERM_WAIT_S = 5.0
KILL_WAIT_S = 2.0
POLL_S = 0.1


@dataclass(frozen=True)
class LockNote:
    """What an item's lock file says about the run holding it."""

    item: str
    scheduler_pid: int
    host: str
    started: float
    timeout: float
    child_pid: int | None = None
    """The run's latest child (it leads its own process group: pgid == child_pid)."""

    def text(self) -> str:
        return json.dumps({**dataclasses.asdict(self), "pgid": self.child_pid})

    @classmethod
    def parse(cls, text: str) -> LockNote | None:
        """None for a note in another form (an older version's "pid N on host")."""
        try:
            raw = json.loads(text)
            child = raw.get("child_pid")
            return cls(str(raw["item"]), int(raw["scheduler_pid"]), str(raw["host"]),
                       float(raw["started"]), float(raw["timeout"]),
                       int(child) if child is not None else None)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    @property
    def pid(self) -> int:
        """The pid to name: the orphan itself when known, else its scheduler."""
        return self.child_pid if self.child_pid is not None else self.scheduler_pid

    def deadline(self) -> float:
        return self.started + self.timeout + ORPHAN_GRACE_S


def skip_reason(holder: str) -> str:
    """What `ItemLocks.acquire` answered, as the words of a skipped run."""
    if holder.startswith(("the ", "running in another process")):
        return holder
    return f"running in another process ({holder})"


def _clock(at: float) -> str:
    return time.strftime("%H:%M", time.localtime(at))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process (a reused pid): not provably dead
    return True


def lock_path(state_dir: Path, item_id: str) -> Path:
    """A file name for any item id ("cron.hourly/x", a check name with spaces...)."""
    name = quote(item_id, safe="")
    if len(name) > _MAX_NAME:
        name = name[:80] + "-" + hashlib.sha256(item_id.encode()).hexdigest()[:32]
    return state_dir / LOCKS_DIR / f"{name}.lock"


class ItemLocks:
    def __init__(self, state_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self.state_dir = state_dir
        self.clock = clock
        self._held: dict[str, int] = {}
        self._notes: dict[str, LockNote] = {}
        self._guard = threading.Lock()
        """Run threads name their children while the loop's thread takes and releases."""

    def acquire(self, item_id: str, timeout: float = 0.0) -> str | None:
        """None when we hold the item's lock now (or locking is unsupported here); else why
        not: who holds it, or the orphan of a crashed scheduler being waited for. An orphan
        past its timeout is ended here (which may take TERM_WAIT_S + KILL_WAIT_S), and the
        lock taken once it is gone."""
        note = LockNote(item_id, os.getpid(), socket.gethostname(), self.clock(), timeout)
        holder = self._take(item_id, note)
        if holder is None:
            return None
        found = LockNote.parse(holder)
        if found is None:
            return holder  # an older version's note ("pid N on host"), or none written (full disk)
        if found.host != note.host:
            return (f"the run started at {_clock(found.started)} by the instance on {found.host} "
                    f"(pid {found.pid}) is still going: waiting for it (it can only be ended on "
                    f"{found.host})")
        if _alive(found.scheduler_pid):
            return f"running in another process (pid {found.scheduler_pid} on {found.host})"
        if note.started <= found.deadline():
            return (f"the run started by the previous instance at {_clock(found.started)} "
                    f"(pid {found.pid}) is still going: waiting for it (ends by "
                    f"{_clock(found.deadline())})")
        return self._end_orphan(item_id, found, note)

    def _take(self, item_id: str, note: LockNote) -> str | None:
        path = lock_path(self.state_dir, item_id)
        try:
            make_dirs(path.parent)
            fd, holder = take_flock(path, note.text())
        except OSError as exc:
            # A full or broken state directory must not stop the checks: the item runs
            # unlocked, and the state directory's own alert says what is wrong with it.
            LOG.warning("item %s runs without its lock: %s", item_id, exc)
            return None
        if fd is not None:
            with self._guard:
                self._held[item_id] = fd
                self._notes[item_id] = note
        return holder

    def _end_orphan(self, item_id: str, orphan: LockNote, note: LockNote) -> str | None:
        """TERM the orphan's process group, KILL it if it lingers, and take the lock once
        it is free; None when taken (the item runs now), else why not yet."""
        said = (f"the orphaned run of {item_id} (pid {orphan.pid}, started at "
                f"{_clock(orphan.started)} by an instance that crashed) ran past its timeout of "
                f"{humanize.duration(orphan.timeout)}")
        if orphan.child_pid is None:
            return f"{said}, but its process is not known: waiting for it"
        for sig, wait in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(orphan.child_pid, sig)
            end = time.monotonic() + wait
            while time.monotonic() < end:
                if self._take(item_id, note) is None:
                    LOG.warning("%s: ended it (SIGTERM%s to its process group)", said,
                                ", then SIGKILL" if sig == signal.SIGKILL else "")
                    return None
                time.sleep(POLL_S)
        return f"{said}: sent SIGTERM and SIGKILL, but something of it still holds the item"

    def holding(self, item_id: str) -> Holding:
        """What a run's children keep: the item's lock (if held), and a note of each."""
        fd = self._held.get(item_id)
        return Holding((fd,) if fd is not None else (), lambda pid: self.child_started(item_id, pid))

    def child_started(self, item_id: str, pid: int) -> None:
        """Name the run's newest child in the lock's note: after a crash, the orphan."""
        with self._guard:  # never into a file released (and its fd number reused) meanwhile
            fd, note = self._held.get(item_id), self._notes.get(item_id)
            if fd is not None and note is not None:
                self._notes[item_id] = note = dataclasses.replace(note, child_pid=pid)
                rewrite_note(fd, note.text())

    def release(self, item_id: str) -> None:
        with self._guard:
            self._notes.pop(item_id, None)
            fd = self._held.pop(item_id, None)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                os.close(fd)
