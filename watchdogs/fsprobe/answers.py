"""Which of a config's folders sit on a filesystem that does not answer (a hung NFS or
Lustre mount): asked in a child process with a deadline (watchdogs.fsprobe.bounded), so
that loading the config names the folder instead of blocking in the kernel for good.

Passed to watchdogs.config.load_config as its `answers` (the config layer cannot start
processes itself)."""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from watchdogs.fsprobe.bounded import FsError, FsNotResponding, probe, run_bounded

COMMAND_S = 5.0
"""A command's deadline: a live filesystem answers in milliseconds, a loaded NFS in < 1 s."""
SCHEDULER_S = 15.0
"""The scheduler's: a slow mount is no reason to leave the chain's place (a tick is 10 s)."""


STAT_TOOLS = ("/usr/bin/stat", "/bin/stat")
"""coreutils' stat, at fixed places on the root filesystem: a PATH search could itself walk
into the hung mount (a ~/bin there)."""


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
    what = ", ".join(map(str, paths))
    stat = next((t for t in STAT_TOOLS if os.access(t, os.X_OK)), None)
    try:
        if stat is None:
            probe("answers", {"paths": [str(p) for p in paths]}, timeout, what)
        else:
            # coreutils' stat starts in about a millisecond, our Python probe child in ten: on
            # the path of every command. Each folder and every parent up to /, links followed
            # as the config's checks follow them; those that do not exist are errors, ignored.
            run_bounded([stat, "-L", "-c", "", "--", *_with_parents(paths)], timeout, what)
    except FsNotResponding:
        return False
    except FsError:  # an error is an answer: the config's own checks say what is wrong
        return True
    return True


def _with_parents(paths: Sequence[Path]) -> list[str]:
    seen: dict[str, None] = {}
    for path in paths:
        where = Path(os.path.normpath(path))
        for each in (where, *where.parents):
            seen.setdefault(str(each))
    return list(seen)
