"""Delete run logs (and the scheduler's own Slurm output files) older than `log_retention`,
so the watchdog never eats the inode quota it is watching."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchdogs.config.model import SchedulerSettings
    from watchdogs.scheduler.records import Records

LOG = logging.getLogger("watchdogs.scheduler")

SCHEDULER_LOGS = "scheduler"
RUNS_DIR = "runs"
"""Per-run logs: <state_dir>/runs/<item>/<stamp>.log (here, not in runner.py, so that
`watchdogs status` can name the folder without importing the scheduler)."""


def prune_files(root: Path, cutoff: float) -> int:
    """Remove regular files under `root` last modified before `cutoff` (Unix seconds), then
    the folders left empty. Returns how many files went. Never follows symlinks."""
    if not root.is_dir():
        return 0
    removed = 0
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            path = Path(folder) / name
            try:
                if path.lstat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError:
                continue  # vanished or not ours to remove: leave it
        for name in dirs:
            path = Path(folder) / name
            try:
                # Only old folders: a run may be about to write into a fresh one.
                if path.lstat().st_mtime < cutoff:
                    path.rmdir()  # only succeeds when empty
            except OSError:
                pass
    return removed


def prune_state(settings: SchedulerSettings, records: Records, now: float) -> None:
    """Everything older than `log_retention`: run logs, the scheduler's own logs, and the
    run history in the state database."""
    cutoff = now - settings.log_retention
    state = settings.state_dir
    removed = prune_files(state / RUNS_DIR, cutoff) + prune_files(state / SCHEDULER_LOGS, cutoff)
    history = records.prune(cutoff)
    if removed or history:
        LOG.info("pruned %d run logs and %d history rows older than the log retention", removed, history)
