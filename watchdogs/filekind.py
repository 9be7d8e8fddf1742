"""What a user-given path is, in words, and reading it only when it is a regular file.

A `log_stale` path, a config file or a password file that is a FIFO would block the reader
in `open()` until some writer comes (forever); a socket cannot be opened at all; a
directory or a device has no lines to tail. Each is named for what it is ("… is a FIFO
(named pipe), not a regular file"), at once, instead of hanging a probe until it times out
and reads as "filesystem not responding".

`open_regular` opens with O_NONBLOCK (a FIFO's open returns at once) and judges the open
descriptor with fstat, so a file swapped for a FIFO between a look and the open is still
caught. Only `os` and `stat`: the filesystem probe's child process imports this for every
probe it starts.
"""
from __future__ import annotations

import os
import stat

_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind_words(mode: int) -> str:
    """"a FIFO (named pipe)", "a socket", "a directory", ... for an st_mode."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a special file"


class NotRegular(OSError):
    """The path exists but is not a regular file. An OSError, so a caller that already
    treats an unreadable file as "cannot read it" keeps working, now with the kind in words."""

    def __init__(self, path: str, kind: str, wanted: str = "a regular file") -> None:
        super().__init__(f"{path} is {kind}, not {wanted}")
        self.path = path
        self.kind = kind
        self.wanted = wanted

    def __str__(self) -> str:
        return str(self.args[0])


def check_regular(path: str | os.PathLike[str], st: os.stat_result,
                  wanted: str = "a regular file") -> None:
    """Raise NotRegular unless `st` (of `path`) is a regular file."""
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(os.fspath(path), kind_words(st.st_mode), wanted)


def open_regular(path: str | os.PathLike[str], *, follow: bool = True,
                 wanted: str = "a regular file") -> int:
    """A blocking read-only descriptor of `path`, only if it is a regular file; NotRegular
    (naming the kind) otherwise. Never blocks on a FIFO. `follow=False` refuses a symbolic
    link as the last component (O_NOFOLLOW). The caller closes the descriptor."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        # A socket cannot be opened (ENXIO), a link under O_NOFOLLOW gives ELOOP: name the
        # kind when the path has one, else the plain error stands.
        try:
            st = os.stat(path, follow_symlinks=follow)
        except OSError:
            raise exc from None
        check_regular(path, st, wanted)
        raise
    try:
        check_regular(path, os.fstat(fd), wanted)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], limit: int = -1, *, follow: bool = True,
                 wanted: str = "a regular file") -> bytes:
    """The bytes of a regular file (at most `limit`; -1: all of it); NotRegular otherwise."""
    fd = open_regular(path, follow=follow, wanted=wanted)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


def read_tail(path: str | os.PathLike[str], tail_bytes: int, *, follow: bool = True,
              wanted: str = "a regular file") -> tuple[bytes, int]:
    """The last `tail_bytes` of a regular file and its size; NotRegular otherwise."""
    fd = open_regular(path, follow=follow, wanted=wanted)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - tail_bytes))
        return fh.read(tail_bytes), size
