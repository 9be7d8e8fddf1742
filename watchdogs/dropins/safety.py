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

from watchdogs.result import storable
from watchdogs.trust import distrust, unsafe_reason

__all__ = ["Refusal", "check_path", "is_documentation", "is_executable", "is_leftover",
           "unsafe_reason"]

_LEFTOVER_SUFFIXES = ("~", ".swp", ".swo", ".swx", ".bak", ".old", ".orig", ".rej", ".tmp",
                      ".save", ".disabled", ",v")
_LEFTOVER_INFIXES = (".dpkg-", ".rpmnew", ".rpmsave", ".rpmorig", ".ucf-", ".cfsaved")


@dataclass(frozen=True)
class Refusal:
    """A drop-in (or folder, or crontab line) that will not run, and why."""

    path: str
    """Shown and keyed on (the refusal's alert id): a byte of the file name that is not
    UTF-8 is `\\xNN` here, decoded once (textsafe.from_os)."""
    reason: str

    def __post_init__(self) -> None:
        storable(self, "path", "reason")

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


def check_path(path: Path, uid: int) -> str | None:
    """Why a path (following symlinks) and the folders above it are not trusted
    (watchdogs.trust), or why it cannot be looked at; None when it is safe."""
    found = distrust(path, uid)
    if found is None:
        return None
    return found.why if found.path == str(Path(os.path.abspath(path))) else f"{found.path}: {found.why}"


def is_executable(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
