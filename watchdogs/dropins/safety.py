"""run-parts/cron safety rules for drop-ins.

Skipped silently: hidden files, editor or package-manager leftovers and READMEs, which
are never meant to run. Shown as not run: anything else that cannot run (not executable,
a dangling symlink, a symlink loop). Refused loudly: files and folders that someone else could have written,
since on shared storage they would let others run code as you. Root-owned files are
accepted as well as your own (root can run code as you anyway), which lets a crontab
line or a symlink name a system plugin such as /usr/lib/nagios/plugins/check_disk.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

_LEFTOVER_SUFFIXES = ("~", ".swp", ".swo", ".swx", ".bak", ".old", ".orig", ".rej", ".tmp",
                      ".save", ".disabled", ",v")
_LEFTOVER_INFIXES = (".dpkg-", ".rpmnew", ".rpmsave", ".rpmorig", ".ucf-", ".cfsaved")


@dataclass(frozen=True)
class Refusal:
    """A drop-in (or folder, or crontab line) that will not run, and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def is_leftover(name: str) -> bool:
    """Hidden files, editor backups/swap files, package-manager leftovers (.dpkg-old, .rpmnew...)."""
    if name.startswith(".") or (name.startswith("#") and name.endswith("#")):
        return True
    lowered = name.lower()
    return lowered.endswith(_LEFTOVER_SUFFIXES) or any(i in lowered for i in _LEFTOVER_INFIXES)


_DOC_SUFFIXES = (".md", ".txt", ".rst")


def is_documentation(name: str) -> bool:
    """README, notes.md: documentation kept beside the drop-ins, never meant to run."""
    return name.upper().startswith("README") or name.lower().endswith(_DOC_SUFFIXES)


def unsafe_reason(st: os.stat_result, uid: int) -> str | None:
    """Why a file or folder with this stat must not be trusted, or None if it is safe."""
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid not in (uid, 0):
        return f"owned by uid {st.st_uid}, not by you (uid {uid}) or root"
    if mode & stat.S_IWOTH:
        return f"writable by others (mode {mode:04o})"
    if mode & stat.S_IWGRP:
        return f"writable by group (mode {mode:04o})"
    return None


def check_path(path: Path, uid: int) -> str | None:
    """`unsafe_reason` for a path (following symlinks), or why it cannot be looked at."""
    try:
        return unsafe_reason(path.stat(), uid)
    except OSError as exc:
        return f"cannot stat: {exc.strerror}"


def is_executable(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
