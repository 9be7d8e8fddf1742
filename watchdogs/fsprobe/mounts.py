"""Which filesystem type holds a path, from /proc/self/mountinfo (no access to the path
itself, so a dead mount cannot block the lookup)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fs_type: str
    source: str


def _unescape(field: str) -> str:
    """mountinfo writes spaces, tabs, newlines and backslashes as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if sep and len(fields) >= 5 and len(tail) >= 2:
            mounts.append(Mount(_unescape(fields[4]), tail[0], _unescape(tail[1])))
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding `path` (by the longest mount point that is a prefix of its absolute
    form; symlinks are not resolved, which would touch the filesystem)."""
    target = os.path.abspath(path)
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.mount_point)):
            best = mount
    return best


def fs_type(path: str) -> str | None:
    try:
        mounts = parse_mountinfo(MOUNTINFO.read_text())
    except OSError:
        return None
    found = mount_of(path, mounts)
    return found.fs_type if found else None
