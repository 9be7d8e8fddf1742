"""Which of a config's folders sit on a filesystem that does not answer (a hung NFS or
Lustre mount): asked in a child process with a deadline (watchdogs.fsprobe.bounded), so
that loading the config names the folder instead of blocking in the kernel for good.

Passed to watchdogs.config.load_config as its `answers` (the config layer cannot start
processes itself)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from watchdogs.fsprobe.bounded import FsError, FsNotResponding, probe

COMMAND_S = 5.0
"""A command's deadline: a live filesystem answers in milliseconds, a loaded NFS in < 1 s."""
SCHEDULER_S = 15.0
"""The scheduler's: a slow mount is no reason to leave the chain's place (a tick is 10 s)."""


def unanswered(paths: Sequence[Path], timeout: float = COMMAND_S) -> frozenset[Path]:
    """The paths whose filesystem did not answer a stat within `timeout` (twice that at most:
    all at once, then, only when that failed, each alone, side by side)."""
    if _answers(paths, timeout):
        return frozenset()
    if len(paths) == 1:
        return frozenset(paths)
    from concurrent.futures import ThreadPoolExecutor  # here: only when one did not answer

    with ThreadPoolExecutor(max_workers=len(paths)) as pool:
        answered = list(pool.map(lambda p: _answers([p], timeout), paths))
    return frozenset(p for p, ok in zip(paths, answered, strict=True) if not ok)


def _answers(paths: Sequence[Path], timeout: float) -> bool:
    try:
        probe("answers", {"paths": [str(p) for p in paths]}, timeout, ", ".join(map(str, paths)))
    except FsNotResponding:
        return False
    except FsError:  # an error is an answer: the config's own checks say what is wrong
        return True
    return True
