"""How trainguard writes its own files in the run folder (heartbeats, records, the summary,
the exit file): the run folder is often shared with a team, so a name another user could
guess and plant (a symlink at `.rank-0.json.<pid>.tmp`) must never be written through.

- `write_atomic`: a temporary file made by `mkstemp` in the target's folder (O_EXCL and
  O_NOFOLLOW: a fresh inode, never a planted one), given its mode explicitly whatever the
  umask, then renamed over the target (a rename replaces a link, never follows it).
- `append_line`: one `write()` with O_APPEND and O_NOFOLLOW (a journal line).
- `clean_stale`: the temporary files a SIGKILLed writer left behind, removed by the next
  writer at its start (only its own regular files, and only old ones: another writer of the
  same target may be between its mkstemp and its rename).
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from pathlib import Path

SUFFIX = ".tmp"
STALE_AFTER = 300.0     # s; a write takes milliseconds, even on a slow NFS server


def _prefix(target: Path) -> str:
    return f".{target.name}."


def write_atomic(target: Path, data: bytes | str, mode: int = 0o644, fsync: bool = False) -> None:
    """Replace `target` by `data` at once (readers see the old file or the new one); OSError
    when the folder takes no file. A str is written as UTF-8 with undecodable characters
    shown as escapes: a byte from outside never fails the write."""
    target = Path(target)
    payload = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_prefix(target), suffix=SUFFIX)
    try:
        os.fchmod(fd, mode)   # mkstemp gives 0600; others (the watchdog, other ranks) read these
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    try:
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def append_line(path: Path, line: bytes, mode: int = 0o644) -> None:
    """Append `line` in one write; a symlink at `path` is refused (ELOOP), never followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def make_dirs(path: Path, mode: int = 0o755) -> None:
    """Create `path` and its missing parents one by one, each with `mode` whatever the umask
    (`mkdir -p` gives the parents the umask's mode); a folder that exists is left as it is."""
    path = Path(path)
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            continue          # another rank made it first: its mode is its maker's
        os.chmod(folder, mode, follow_symlinks=False)


def clean_stale(target: Path, now: float | None = None, older_than: float = STALE_AFTER) -> int:
    """Remove this user's temporary files of `target` older than `older_than` seconds (a
    writer killed between its mkstemp and its rename); how many. Never raises."""
    target = Path(target)
    now = time.time() if now is None else now
    removed, uid, prefix = 0, os.getuid(), _prefix(target)
    try:
        names = os.listdir(target.parent)
    except OSError:
        return 0
    for name in names:
        if not (name.startswith(prefix) and name.endswith(SUFFIX)):
            continue
        path = target.parent / name
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_uid == uid and now - st.st_mtime > older_than:
                os.unlink(path)
                removed += 1
        except OSError:
            continue
    return removed
