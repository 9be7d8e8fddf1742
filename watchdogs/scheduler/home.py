"""One run of a cron-like home (`watchdogs run --once --due --home scrontab|cron|timer`):
the exclusive right to tick first, so two homes never both run the items and never both
alert. The scheduler lock (watchdogs.scheduler.lock) is taken without waiting and held for
the run: held by a chain instance or another home's run, this run says so and leaves with
nothing run and nothing sent. Where the folder cannot lock at all, a scheduler the view
shows alive decides the same.

The run is recorded as an instance of mode KIND, so `status` knows a home ticks here, and
the dead man's switch is pinged after each run (`/fail` when the config cannot load).
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from watchdogs.scheduler.lock import HOME_NOTE, LOCK_NAME, take_flock

HOME_KINDS = ("scrontab", "cron", "timer")
HOME_PERIOD_S = 60.0
"""Every minute: what each home's entry asks for (watchdogs.scheduler.homes.EVERY)."""


@dataclass(frozen=True)
class Turn:
    """This run's right to tick: `fd` holds the lock (None where locks do not work);
    `skipped` says why it must not run."""

    fd: int | None
    skipped: str | None = None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def take_turn(state_dir: Path, stop_file: Path, kind: str, alive_elsewhere: str | None) -> Turn:
    """`alive_elsewhere`: a scheduler the view shows alive (asked only where no lock works)."""
    if stop_file.exists():
        return Turn(None, f"stopped by `watchdogs stop` ({stop_file} exists); `watchdogs start --home "
                          f"{kind}` starts it again")
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    # HOME_NOTE first: a chain instance starting meanwhile waits for this run to end
    # (watchdogs.scheduler.lock.wait_for_holder) rather than give up.
    note = (f"{HOME_NOTE} {kind} (pid {os.getpid()} on {socket.gethostname()}, "
            f"since {time.strftime('%H:%M:%S')})\n")
    fd, holder = take_flock(state_dir / LOCK_NAME, note)
    if holder:
        return Turn(None, f"another home holds the state: {holder}; this run is skipped")
    if fd is None and alive_elsewhere:
        return Turn(None, f"another home holds the state: {alive_elsewhere}; this run is skipped")
    return Turn(fd)
