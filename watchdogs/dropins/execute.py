"""Run one executable drop-in: its own session (process group), its own log, a timeout.

At the timeout the whole process group gets SIGTERM, then SIGKILL after KILL_GRACE_S, so
a hung `df` on a dead mount or a forgotten child cannot block later runs. The output
follows the Nagios plugin convention (exit code = status, first line = summary, perfdata
after `|`), so existing monitoring plugins work unchanged.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from watchdogs import humanize
from watchdogs.result import CheckResult, Status, parse_plugin_output

KILL_GRACE_S = 5.0
MAX_PARSED_BYTES = 1 << 20
TIMEOUT = "timeout"
SHUTDOWN = "shutdown"


class DropInProcess:
    """One run. `run()` blocks until the process ends and returns its result, or None when
    the scheduler cut it off on shutdown (that run counts as not run). `kill()` may be called
    from any thread."""

    def __init__(self, argv: Sequence[str], timeout: float, log_path: Path,
                 env: Mapping[str, str], cwd: Path) -> None:
        self.argv = tuple(argv)
        self.timeout = timeout
        self.log_path = log_path
        self.env = dict(env)
        self.cwd = cwd
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._why: str | None = None

    def run(self) -> CheckResult | None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        started = time.monotonic()
        with open(self.log_path, "wb") as out, open(self._err_path(), "w+b") as err:
            try:
                code = self._run(out, err)
            except OSError as exc:
                code, why = None, f"cannot run {self.argv[0]}: {exc.strerror or exc}"
                err.write(why.encode())
            err.seek(0)
            errors = err.read(MAX_PARSED_BYTES).decode(errors="replace")
        self._err_path().unlink(missing_ok=True)
        output = self._read_output()
        result = self._result(code, output, errors)
        self._append_footer(errors, code, time.monotonic() - started, result)
        return result

    def kill(self, why: str) -> None:
        """Terminate the whole process group; the first reason given wins."""
        with self._lock:
            if self._why is None:
                self._why = why
            proc = self._proc
        if proc is not None and proc.returncode is None:
            self._signal_group(proc, signal.SIGTERM)
            follow_up = threading.Timer(KILL_GRACE_S, self._signal_group, args=(proc, signal.SIGKILL))
            follow_up.daemon = True
            follow_up.start()

    def _run(self, out: IO[bytes], err: IO[bytes]) -> int | None:
        with self._lock:
            if self._why is not None:
                return None  # shut down before it started
            # A session of its own, so a timeout kills the drop-in's children too.
            self._proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          cwd=self.cwd, env=self.env, start_new_session=True)
        timer = threading.Timer(self.timeout, self.kill, args=(TIMEOUT,))
        timer.daemon = True
        timer.start()
        code = self._proc.wait()
        timer.cancel()
        if self._why is not None:
            self._signal_group(self._proc, signal.SIGKILL)  # stragglers of a killed run
        return code

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
            os.killpg(proc.pid, sig)

    def _result(self, code: int | None, output: str, errors: str) -> CheckResult | None:
        if self._why == SHUTDOWN:
            return None
        first = output.strip().splitlines()[:1]
        if self._why == TIMEOUT:
            # A hung check usually means a hung mount or daemon: CRITICAL, as Nagios Core
            # reports a plugin timeout by default (service_check_timeout_state=c).
            return CheckResult(Status.CRITICAL, f"killed after {humanize.duration(self.timeout)} "
                               "(timeout): process group terminated", tuple(first))
        if code is None:
            return CheckResult(Status.UNKNOWN, errors.strip() or f"cannot run {self.argv[0]}")
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return CheckResult(Status.UNKNOWN, humanize.killed_by(-code), tuple(first),
                               context={"killed_by": name}, killed_by=name)
        if not output.strip() and errors.strip():
            output = errors.strip().splitlines()[-1]  # no stdout: the last error line says why
        return parse_plugin_output(code, output)

    def _read_output(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                return fh.read(MAX_PARSED_BYTES).decode(errors="replace")
        except OSError:
            return ""

    def _append_footer(self, errors: str, code: int | None, elapsed: float,
                       result: CheckResult | None) -> None:
        lines = []
        if errors.strip():
            lines.append("--- stderr ---\n" + errors.rstrip("\n"))
        verdict = result.status.name if result else "interrupted (scheduler stopped)"
        lines.append(f"--- {' '.join(self.argv)}: exit {code} after {elapsed:.2f}s: {verdict}")
        with open(self.log_path, "a") as fh:
            fh.write("\n" + "\n".join(lines) + "\n")

    def _err_path(self) -> Path:
        return self.log_path.with_name(self.log_path.name + ".stderr")
