"""Exit without the interpreter's slow finalisation, once the guard has decided to exit.

After the guard's SystemExit has unwound the training (its `finally` blocks and context
managers ran) and the interpreter has joined its non-daemon threads and started the
atexit handlers, tearing down a process that imported torch still takes ~0.6 s of module
garbage collection that no one observes. The handler below, registered at
`Guard.start()`, runs in its turn among the atexit handlers (after every handler
registered later: torch's, a tracker's set up after the guard), flushes logging and
stdout/stderr and ends the process with the guard's exit code. Skipped: the interpreter's
finalisation, and atexit handlers registered *before* `guard.start()` (other than
logging's, run here): one more reason to start the guard first thing. It does nothing
unless the guard itself is exiting (`arm`); `fast_exit = false` turns it off.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys


class FastExit:
    def __init__(self) -> None:
        self.code: int | None = None
        self._running = False
        self._installed = False

    def install(self) -> None:
        if not self._installed:
            self._installed = True
            atexit.register(self._at_exit)

    def arm(self, code: int) -> None:
        self.code = code

    def _at_exit(self) -> None:
        if self.code is None or self._running:
            return
        self._running = True
        logging.shutdown()     # logging's own atexit handler was registered before this one
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        # os._exit skips only what is listed in the module docstring.
        os._exit(self.code)
