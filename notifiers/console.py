"""`console`: alerts on standard output (the scheduler job's log)."""
from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import ClassVar

from notifiers.base import Message, Notifier
from watchdogs.config.options import Option, choice


class ConsoleNotifier(Notifier):
    type_name = "console"
    options: ClassVar[Mapping[str, Option]] = {
        "stream": Option(choice("stdout", "stderr"), default="stdout"),
    }

    def describe(self) -> str:
        return f"printed on {self.opts['stream']}"

    def send_budget(self) -> float:
        return 30.0

    def notify(self, message: Message) -> None:
        stream = sys.stdout if self.opts["stream"] == "stdout" else sys.stderr
        print(f"[{message.severity.upper()}] {message.subject}\n{message.text}", file=stream, flush=True)
