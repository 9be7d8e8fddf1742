"""Switch files and the stop-request file.

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

import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from trainguard.causes import Cause
from trainguard.signals import parse_signal

log = logging.getLogger("trainguard")


@dataclass(frozen=True)
class FileState:
    mask: int = 0
    stop_signal: signal.Signals | None = None


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


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

    @property
    def any(self) -> bool:
        return any(p is not None for p in (self.kill_switch, self.save_switch, self.stop_file))

    def kill_switch_present(self) -> bool:
        return self.kill_switch is not None and self.kill_switch.exists()

    def poll(self) -> FileState:
        mask = Cause.KILL_SWITCH.bit if self.kill_switch_present() else 0
        if self.save_switch is not None:
            mtime = _mtime(self.save_switch)
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
        self._handled_save_mtime = _mtime(self.save_switch)
        if remove:
            self._remove(self.save_switch)

    @staticmethod
    def _remove(path: Path) -> None:
        # Removing the save switch is how the user sees that the save was done.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
