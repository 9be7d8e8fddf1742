"""`logfile`: one greppable line per alert and resolution, appended to a file (for example
the training's own log, so whoever reads it sees the watchdog's verdicts in place)."""
from __future__ import annotations

import os
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
            raise TransportError(f"cannot append to {self.opts['path']}: {exc.strerror}") from None

    def _append(self, data: bytes) -> None:
        """One O_APPEND write, so lines from several writers never interleave mid-line."""
        fd = os.open(self.opts["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
