"""Switch files and the stop-request file.

Each name counts as present when it exists as a name (lstat): a dangling symlink or a
symlink loop is a switch thrown, and the log says so. A save switch that is a directory is
ignored with a warning (it cannot be removed the way the guard acknowledges a save).

- kill switch: exists -> save and stop, no requeue (also checked at start-up, so a queued
  job array burns through in seconds). Never removed by the guard: removing it is the
  user's way of saying "run again".
- save switch: exists -> save, remove the file, continue.
- stop-request file: written by the batch script's trap ("USR1 <job id> <restart count>"):
  the warning signal as a file, for launchers and containers that do not forward signals.
  A file from another job or an earlier restart of this one is ignored.

The guard calls `poll()` at most every `file_every` seconds: a stat per file.
"""
from __future__ import annotations

import errno
import logging
import os
import signal
import stat
from dataclasses import dataclass
from pathlib import Path

from trainguard.causes import Cause
from trainguard.stopping.signals import parse_signal

log = logging.getLogger("trainguard")


@dataclass(frozen=True)
class FileState:
    mask: int = 0
    stop_signal: signal.Signals | None = None


def _lstat(path: Path) -> os.stat_result | None:
    # lstat, not stat: a name that exists is a switch thrown, even when it is a dangling
    # symlink or a symlink loop (stat would say "no such file" and the switch would be lost).
    try:
        return os.lstat(path)
    except OSError:
        return None


def _link_problem(path: Path) -> str:
    """"" when `path` resolves; else what is wrong with the symlink."""
    try:
        path.stat()
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else "a dangling symlink"
    return ""


def parse_stop_request(text: str, job_id: str, restart_count: int) -> signal.Signals | None:
    """"USR1 88 2" -> SIGUSR1 when it is for job 88, restart 2 (or names no job at all)."""
    parts = text.split()
    if not parts:
        return parse_signal("USR1")
    try:
        sig = parse_signal(parts[0])
    except ValueError:
        log.warning("trainguard: stop-request file says %r; treating it as USR1", parts[0])
        sig = signal.SIGUSR1
    if len(parts) >= 2 and job_id and parts[1] != job_id:
        return None
    if len(parts) >= 3 and parts[2].isdigit() and int(parts[2]) != restart_count:
        return None
    return sig


class FileWatch:
    def __init__(self, kill_switch: Path | None, save_switch: Path | None, stop_file: Path | None,
                 job_id: str, restart_count: int) -> None:
        self.kill_switch = kill_switch
        self.save_switch = save_switch
        self.stop_file = stop_file
        self.job_id = job_id
        self.restart_count = restart_count
        self._handled_save_mtime: float | None = None
        self._warned: set[str] = set()     # what the log already said, once per kind

    @property
    def any(self) -> bool:
        return any(p is not None for p in (self.kill_switch, self.save_switch, self.stop_file))

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def kill_switch_present(self) -> bool:
        if self.kill_switch is None or _lstat(self.kill_switch) is None:
            return False
        problem = _link_problem(self.kill_switch)
        if problem:
            self._warn_once("kill-link", "trainguard: kill switch %s is %s: it exists, so the switch "
                            "is thrown", self.kill_switch, problem)
        return True

    def _save_mtime(self) -> float | None:
        """The save switch's mtime when it is thrown; None when absent or a directory."""
        st = _lstat(self.save_switch) if self.save_switch is not None else None
        if st is None:
            return None
        if stat.S_ISDIR(st.st_mode):
            self._warn_once("save-dir", "trainguard: save switch %s is a directory: ignored (the "
                            "switch is a file, removed once the save is done)", self.save_switch)
            return None
        return st.st_mtime

    def poll(self) -> FileState:
        mask = Cause.KILL_SWITCH.bit if self.kill_switch_present() else 0
        mtime = self._save_mtime()
        if mtime is not None and mtime != self._handled_save_mtime:
            mask |= Cause.SAVE_SWITCH.bit
        return FileState(mask, self._stop_request())

    def _stop_request(self) -> signal.Signals | None:
        if self.stop_file is None:
            return None
        try:
            text = self.stop_file.read_text()
        except OSError:
            return None
        return parse_stop_request(text, self.job_id, self.restart_count)

    def consume_save_switch(self, remove: bool) -> None:
        """Remember the switch we acted on (so a rank that sees it again before it is gone
        does not save twice) and, on one rank, remove it."""
        if self.save_switch is None:
            return
        self._handled_save_mtime = self._save_mtime()
        if remove and self._handled_save_mtime is not None:
            self._remove(self.save_switch)

    @staticmethod
    def _remove(path: Path) -> None:
        # Removing the save switch is how the user sees that the save was done. A switch
        # that cannot be removed must not end the training: its mtime is remembered above.
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("trainguard: cannot remove the save switch %s: %s", path, exc)
