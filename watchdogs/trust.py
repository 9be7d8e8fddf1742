"""Trust only the user's own files: one policy for everything the project runs, submits,
renders or writes through (drop-ins, crontab commands, the config, alert templates,
resubmit scripts, the state folder and its `runs`/`locks` subfolders).

A file or folder is trusted when it and every folder above it are owned by you or by root
(root can run code as you anyway) and are not writable by group or others: anyone who can
change any of them can change what runs. A parent folder with the sticky bit (`/tmp`,
mode 1777) is accepted: others may add entries there but cannot replace yours. With
`group_ok` (the config says so on purpose: a team folder), group-writable is accepted.
Secret files keep their own stricter rule (notifiers/secrets.py: not readable by others).

A refusal names the path, its owner, its mode and the fix. `open_trusted` opens a file
without following a symlink at its last component and checks the file it actually opened
(fstat of the descriptor), so the file cannot be swapped between the check and the read.
See docs/trust.md.
"""
from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Distrust:
    """Why a path is not trusted: the path, what is wrong, and the fix."""

    path: str
    why: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}; {self.fix}"


def owner_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def unsafe_reason(st: os.stat_result, uid: int, group_ok: bool = False) -> str | None:
    """Why a file or folder with this stat must not be trusted, or None if it is safe."""
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid not in (uid, 0):
        return f"owned by {owner_name(st.st_uid)}, not by you (uid {uid}) or root (mode {mode:04o})"
    owner = "" if st.st_uid == uid else f", owner {owner_name(st.st_uid)}"
    if mode & stat.S_IWOTH:
        return f"writable by others (mode {mode:04o}{owner})"
    if mode & stat.S_IWGRP and not group_ok:
        return f"writable by group (mode {mode:04o}{owner})"
    return None


def _fix(path: Path, st: os.stat_result, uid: int) -> str:
    if st.st_uid not in (uid, 0):
        return "fix: use a copy in a folder of your own (only its owner can change this one)"
    return f"fix: chmod go-w {path}"


def _parent_problem(path: Path, uid: int, group_ok: bool) -> Distrust | None:
    for parent in path.parents:
        try:
            st = os.stat(parent)
        except OSError as exc:
            return Distrust(str(parent), f"cannot stat: {exc.strerror}", "fix: check the path")
        if st.st_mode & stat.S_ISVTX and st.st_uid in (uid, 0):
            continue          # /tmp-like: others cannot rename or remove what is yours
        reason = unsafe_reason(st, uid, group_ok)
        if reason:
            return Distrust(str(parent), f"a folder above it is {reason}", _fix(parent, st, uid))
    return None


def distrust(path: Path, uid: int | None = None, group_ok: bool = False) -> Distrust | None:
    """Why `path` (a file or folder, and every folder above it) is not trusted, or None.
    A symlink must itself be yours or root's; then what it points to is judged."""
    uid = os.getuid() if uid is None else uid
    path = Path(os.path.abspath(path))
    try:
        link = os.lstat(path)
        st = os.stat(path)
    except OSError as exc:
        return Distrust(str(path), f"cannot stat: {exc.strerror}", "fix: check the path")
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (uid, 0):
        return Distrust(str(path), f"a symlink owned by {owner_name(link.st_uid)}",
                        "fix: replace it with your own file")
    reason = unsafe_reason(st, uid, group_ok)
    if reason:
        return Distrust(str(path), reason, _fix(path, st, uid))
    real = Path(os.path.realpath(path))
    return _parent_problem(real, uid, group_ok) or (
        _parent_problem(path, uid, group_ok) if real != path else None)


class UntrustedFile(OSError):
    """A file that is not the user's own (or root's), or is writable by others."""


def read_trusted(path: Path, uid: int | None = None, group_ok: bool = False,
                 limit: int = 1 << 20) -> bytes:
    """The bytes of `path`, read without following a symlink at its last component, after
    checking the folders above it and the opened file itself. Raises UntrustedFile (with
    the path, owner, mode and fix) or OSError."""
    uid = os.getuid() if uid is None else uid
    path = Path(os.path.abspath(path))
    above = _parent_problem(Path(os.path.realpath(path.parent)) / path.name, uid, group_ok)
    if above is not None:
        raise UntrustedFile(str(above))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == 40:   # ELOOP: the last component is a symlink
            raise UntrustedFile(f"{path}: a symlink; a template or script is read only from a "
                                "regular file of yours (fix: replace the link with the file)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedFile(f"{path}: not a regular file")
        reason = unsafe_reason(st, uid, group_ok)
        if reason:
            raise UntrustedFile(str(Distrust(str(path), reason, _fix(path, st, uid))))
        return read_up_to(fd, limit)
    finally:
        os.close(fd)


def read_up_to(fd: int, limit: int) -> bytes:
    """At most `limit` bytes from an open file (fewer at its end)."""
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def kind_of(st_mode: int) -> str:
    """What a file is, in words: "a regular file", "a FIFO", "a symlink", ..."""
    return next((words for test, words in _KINDS if test(st_mode)), "an unknown kind of file")


@dataclass(frozen=True)
class Refused:
    """An entry of a folder that is not read: what it is, who owns it, why."""

    kind: str
    owner_uid: int | None
    why: str

    @property
    def owner(self) -> str:
        return "an unknown owner" if self.owner_uid is None else owner_name(self.owner_uid)


def open_entry(folder_fd: int, name: str, uid: int | None = None, limit: int = 1 << 16) -> bytes | Refused:
    """The bytes of entry `name` of the open folder `folder_fd`, when it is a regular file
    owned by `uid` (you by default) of at most `limit` bytes; else why not (Refused).
    Opened without following a link (O_NOFOLLOW) and without blocking (O_NONBLOCK: a FIFO
    would wait for a writer for ever), then judged by fstat of what was opened, so the entry
    cannot be swapped between the check and the read. OSError only for a failed read."""
    uid = os.getuid() if uid is None else uid
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError as exc:
        try:
            st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except OSError:
            raise exc from None
        return Refused(kind_of(st.st_mode), st.st_uid, exc.strerror or str(exc))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Refused(kind_of(st.st_mode), st.st_uid, "not a regular file")
        if st.st_uid != uid:
            return Refused(kind_of(st.st_mode), st.st_uid, f"owned by {owner_name(st.st_uid)}, not by you")
        if st.st_size > limit:
            return Refused(kind_of(st.st_mode), st.st_uid, f"{st.st_size} bytes, more than {limit}")
        data = read_up_to(fd, limit + 1)  # one more: a file that grew past the limit is refused
        if len(data) > limit:
            return Refused(kind_of(st.st_mode), st.st_uid, f"more than {limit} bytes")
        return data
    finally:
        os.close(fd)


def others_can_write(folder: Path, uid: int | None = None) -> str | None:
    """Who besides you can add, replace or remove entries in `folder` (an existing folder),
    in words, or None. Unlike `distrust` this is a warning's words: a group-shared folder
    may be a deliberate setup (a team's metrics_dir), but what the watchdog writes there
    can then be replaced by the group."""
    uid = os.getuid() if uid is None else uid
    try:
        st = os.stat(folder)
    except OSError:
        return None
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid not in (uid, 0):
        return f"owned by {owner_name(st.st_uid)} (mode {mode:04o})"
    if st.st_mode & stat.S_ISVTX:
        return None   # sticky: others may add, not replace or remove yours
    if mode & stat.S_IWOTH:
        return f"writable by everyone (mode {mode:04o})"
    if mode & stat.S_IWGRP:
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        return f"writable by the group {group} (mode {mode:04o})"
    return None
