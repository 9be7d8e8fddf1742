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


def path_problem(value: Path, exists: str) -> str | None:
    """Why a resolved path option cannot be used as `exists` asks, or None."""
    where = Path(os.path.normpath(value))
    if where.exists() and not where.is_dir():
        return "a folder (this is a file)"
    if exists == DIR:
        return None if where.is_dir() else "an existing folder"
    if where.is_dir():
        return None if os.access(where, os.W_OK | os.X_OK) else "a folder you may write to"
    parent = where
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"a folder that can be created ({parent} is not a folder)"
    if not os.access(parent, os.W_OK | os.X_OK) and not where.exists():
        return f"a folder that can be created ({parent} is not writable)"
    return None
