"""`watchdogs ARGV` in the test's own process (a subprocess costs a second or two of
imports per call): exit code, stdout, stderr, and the tracebacks anything logged."""
from __future__ import annotations

import contextlib
import io
import logging

from watchdogs.cli import main


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.found.append(self.format(record))


def cli(*argv: str) -> tuple[int, str, str, list[str]]:
    """An exception escaping the CLI's error boundary fails the calling test by itself."""
    out, err, logged = io.StringIO(), io.StringIO(), _Tracebacks()
    logging.getLogger().addHandler(logged)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        logging.getLogger().removeHandler(logged)
    return code, out.getvalue(), err.getvalue(), logged.found
