"""`logfile`: one greppable line per alert and resolution, appended to a file (for example
the training's own log, so whoever reads it sees the watchdog's verdicts in place)."""
from __future__ import annotations

import errno
import os
import shlex
import stat
from collections.abc import Mapping
from typing import ClassVar

from notifiers.base import Message, Notifier, TransportError
from watchdogs.config.options import Option, path
from watchdogs.textsafe import visible


class LogfileNotifier(Notifier):
    type_name = "logfile"
    options: ClassVar[Mapping[str, Option]] = {
        "path": Option(path, required=True, help="file to append to (created if missing)"),
    }

    def describe(self) -> str:
        return f"lines appended to {self.opts['path']}"

    def send_budget(self) -> float:
        return 30.0

    def notify(self, message: Message) -> None:
        # Each field of an event is one line already (AlertEvent); a user's template may add
        # text of its own: no escape sequence or carriage return reaches the file either.
        text = visible(message.text)
        data = text if text.endswith("\n") else text + "\n"
        try:
            self._append(data.encode("utf-8"))
        except OSError as exc:
            # A full or read-only disk may recover; a missing folder too (a mount coming back).
            said = self.local_problem() if exc.errno == errno.ENOENT else None
            raise TransportError(said or f"cannot append to {self.opts['path']}: {exc.strerror}") from None

    def local_problem(self) -> str | None:
        # The folder is not created here: a missing one may be a mount not back yet, and a
        # folder made in its place would hide the alerts under the mount when it returns.
        folder = self.opts["path"].parent
        if folder.is_dir():
            return None
        return (f"cannot append to {self.opts['path']}: the folder {folder} does not exist "
                f"(create it: mkdir -p {shlex.quote(str(folder))})")

    def _append(self, data: bytes) -> None:
        """One O_APPEND write, so lines from several writers never interleave mid-line.
        Never through another user's symlink (a training log folder others can write to
        would let them point the alerts into your ~/.bashrc): see watchdogs.trust."""
        target = self.opts["path"]
        # O_NONBLOCK: a FIFO at the path (nobody reading) would block the open for ever, and
        # with it the delivery and the scheduler; only regular files (and devices) are written.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(target, flags | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ENXIO:   # a FIFO nobody reads
                raise TransportError(f"not appending to {target}: a FIFO, not a regular file",
                                     permanent=True) from None
            if exc.errno != errno.ELOOP:
                raise
            owner = os.lstat(target).st_uid
            if owner not in (os.getuid(), 0):
                raise TransportError(f"not appending to {target}: it is a symlink owned by uid {owner}, "
                                     "not by you or root (see docs/trust.md)", permanent=True) from None
            fd = os.open(target, flags, 0o644)
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
            os.close(fd)
            raise TransportError(f"not appending to {target}: not a regular file", permanent=True)
        os.set_blocking(fd, True)
        try:
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
