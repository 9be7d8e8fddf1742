"""What the watchdog creates on disk: explicit modes whatever the umask, folders made one
level at a time, files created exclusively without following links, and temporary files
made by `mkstemp` in the target's own folder and then renamed into place.

Why: `Path.mkdir(parents=True, mode=0o700)` gives the mode to the last folder only, and
even that is masked by the umask; under `umask 002` (common on group-shared project
spaces) the parents come out 0775, which the trust rules then refuse (docs/trust.md). A
temporary file with a predictable name (`.x.<pid>.tmp`) opened by `write_text` follows a
symlink another user planted in a shared folder, and writes through it. Here every folder
made gets `chmod` after `mkdir`, every file `fchmod` on its own descriptor, and a temporary
file is never opened by name: `mkstemp` creates it with O_EXCL (a planted name is skipped,
never followed), and the rename replaces a link at the target itself, never what it points
to.
"""
from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def make_dirs(path: Path, mode: int = PRIVATE_DIR) -> Path:
    """Make `path` and its missing parents, each with exactly `mode` (umask or not). A
    folder that already existed is left as it is: it is not ours to change, and the trust
    rules judge it. Another process making the same folder meanwhile is fine."""
    path = Path(os.path.abspath(path))
    missing: list[Path] = []
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            continue   # made by someone else meanwhile: not ours, so not chmodded
        # The umask masked `mode` in mkdir; the folder is ours and new, so set it exactly.
        os.chmod(folder, mode, follow_symlinks=False)
    if not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(path))
    return path


def create_private(path: Path, mode: int = PRIVATE_FILE, append: bool = False) -> int:
    """A new file at `path`, opened for writing, mode exactly `mode`: O_EXCL (an existing
    name, a planted symlink included, is an error, never written through) and O_NOFOLLOW.
    With `append`, an existing regular file of ours is opened for appending instead (still
    never through a symlink). Returns the descriptor; the caller closes it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_APPEND if append else os.O_EXCL
    fd = os.open(path, flags, mode)
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_atomic(target: Path, data: bytes, mode: int = PRIVATE_FILE, fsync_dir: bool = False) -> Path:
    """Replace `target` with `data`: a temporary file made by mkstemp in the same folder
    (exclusive, random name, never a planted link), given `mode`, written, fsynced, then
    renamed over `target`. A reader never sees half a file; a failure leaves the old one."""
    fd, temp = temp_beside(target, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if fsync_dir:
        sync_dir(Path(target).parent)
    return Path(target)


def temp_beside(target: Path, mode: int = PRIVATE_FILE) -> tuple[int, str]:
    """An open, new, empty temporary file in `target`'s folder (mkstemp: O_EXCL|O_NOFOLLOW,
    a random name starting with `.<target name>.`), mode `mode`: (descriptor, path). For
    writers that fill it by name (SQLite's backup), then rename it into place."""
    target = Path(target)
    # Imported here: tempfile pulls in shutil and random, and every command (status on a
    # login node, in a monitoring loop) loads this module; only the writers need mkstemp.
    import tempfile

    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return fd, temp


def sync_dir(folder: Path) -> None:
    """fsync a folder after a rename in it; some filesystems cannot, and the rename stands."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
