"""Option kinds for what ends up in the filesystem or in Slurm: names that become item ids,
lock and log file names, the scheduler's job name, and folders that must exist or be
creatable (checked by the loader once relative paths are resolved)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from watchdogs.config.options import named_kind

DIR = "dir"
"""`Option.exists`: the path must be an existing folder."""
DIR_OR_NEW = "dir_or_new"
"""`Option.exists`: an existing folder, or one that can be made (its nearest existing
ancestor is a folder we may write to)."""
DIR_TRUSTED = "dir_trusted"
"""`Option.exists`: an existing folder that only you (or root) can change (watchdogs.trust)."""
DIR_OR_NEW_TRUSTED = "dir_or_new_trusted"
"""`Option.exists`: DIR_OR_NEW, and trusted as far as it exists (with its `runs`, `locks`)."""
FILE_TRUSTED = "file_trusted"
"""`Option.exists`: a file that only you (or root) can change (a script to submit), as far
as it exists yet."""
STATE_CHILDREN = ("runs", "locks", "inbox", "inbox/done", "inbox/rejected", "scheduler")
"""The state folder's own subfolders, made by the watchdog and written through every tick
(run logs, locks, queued commands, the scheduler's job log): trusted like the folder."""
MADE_BY_UMASK_002 = (0o775, 0o2775)
"""What `mkdir -p` of an earlier version gave these subfolders under `umask 002` (with the
setgid bit inherited from a shared project folder): see `tighten_own`."""


_NAME_BAD = re.compile(r"[/\x00-\x1f\x7f]")
MAX_NAME = 100


def name(value: Any) -> str:
    """A [[check]] or [[notify]] name: it becomes an item id, a lock and log file name."""
    expected = f"a name of 1 to {MAX_NAME} characters without '/' or control characters"
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME \
            or _NAME_BAD.search(value) or value in (".", ".."):
        raise ValueError(expected)
    return value


_SLURM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")


def slurm_name(value: Any) -> str:
    """A Slurm job name that is also a safe file name: squeue --name takes a comma list,
    and log file names are made from it."""
    if not isinstance(value, str) or not _SLURM_NAME.fullmatch(value):
        raise ValueError("a job name of letters, digits, '_', '.', '+' and '-' (up to 100, "
                         "not starting with '.', '+' or '-')")
    return value


named_kind("name", name)
named_kind("slurm_name", slurm_name)


NOT_ANSWERING = ("a path on a filesystem that answers (it did not within seconds: a hung or dead mount? "
                 "`ls` there would hang too; ask the admins)")
"""The problem of a path whose filesystem did not answer the load's probe (loader.Answers)."""


def path_problem(value: Path, exists: str) -> str | None:
    """Why a resolved path option cannot be used as `exists` asks, or None."""
    where = Path(os.path.normpath(value))
    if exists == FILE_TRUSTED:   # may not exist yet (checked again before each use)
        while not os.path.lexists(where) and where != where.parent:
            where = where.parent
        return _distrusted(where)
    if where.exists() and not where.is_dir():
        return "a folder (this is a file)"
    if exists in (DIR, DIR_TRUSTED):
        if not where.is_dir():
            return "an existing folder"
        return _distrusted(where) if exists == DIR_TRUSTED else None
    if where.is_dir():
        if not os.access(where, os.W_OK | os.X_OK):
            return "a folder you may write to"
        return _state_distrusted(where) if exists == DIR_OR_NEW_TRUSTED else None
    parent = where
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"a folder that can be created ({parent} is not a folder)"
    if not os.access(parent, os.W_OK | os.X_OK) and not where.exists():
        return f"a folder that can be created ({parent} is not writable)"
    return _distrusted(parent) if exists == DIR_OR_NEW_TRUSTED else None


def _distrusted(path: Path) -> str | None:
    from watchdogs.trust import distrust

    found = distrust(path)
    return None if found is None else f"a path only you (or root) can change; {found}"


def _state_distrusted(folder: Path) -> str | None:
    """The state folder, and its own subfolders (STATE_CHILDREN) written through every tick."""
    tighten_own(folder)
    for path in (folder, *(folder / c for c in STATE_CHILDREN if os.path.lexists(folder / c))):
        why = _distrusted(path)
        if why:
            return why
    return None


def tighten_own(state_dir: Path) -> list[str]:
    """Set to 0700 the state folder's own subfolders (STATE_CHILDREN, and the item folders
    under runs/) that an earlier version made 0775 or 2775 under `umask 002`; returns what
    was changed, each also said once on stderr (logging).

    Why tighten rather than refuse: these folders are the watchdog's own, made by it with
    0700 meant (its `mkdir -p` let the umask choose), and nobody is meant to share them;
    refusing them stopped every command after an upgrade until the user ran a chmod for a
    mode the watchdog had set itself. Only exactly those modes, only folders owned by you,
    never a symlink, never the state folder itself or a folder above it (which the user may
    share on purpose): any other mode others can write (0777, 0770, ...) is still refused,
    with `chmod go-w` as the fix. What others may have put into such a folder meanwhile is
    not trusted by being there: the inbox applies only your own regular files."""
    import logging
    import stat

    uid = os.getuid()
    state_dir = Path(state_dir)
    runs = state_dir / "runs"
    folders = [state_dir / c for c in STATE_CHILDREN]
    for top in _subfolders(runs):
        folders += [top, *_subfolders(top)]
    changed = []
    for path in folders:
        try:
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or mode not in MADE_BY_UMASK_002:
                continue
            os.chmod(path, 0o700, follow_symlinks=False)
        except OSError:
            continue  # gone, or not ours to change: the trust check below says what is wrong
        changed.append(f"{path}: mode {mode:04o} made by an earlier version under umask 002; now 0700")
    for line in changed:
        logging.getLogger("watchdogs").warning("%s", line)
    return changed


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
