"""Run one executable drop-in: its own session (process group), its own log, a timeout.

At the timeout the whole process group gets SIGTERM, then SIGKILL after KILL_GRACE_S, so
a hung `df` on a dead mount or a forgotten child cannot block later runs. The drop-in runs
below a small subreaper (`reaper.py`) that kills what it leaves behind when it exits,
even processes that escaped its session; those are named in the result. Its output is
capped (`capture.py`). The output follows the Nagios plugin convention (exit code =
status, first line = summary, perfdata after `|`), so existing monitoring plugins work
unchanged.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from watchdogs import humanize, ownfiles
from watchdogs.dropins import reaper
from watchdogs.dropins.capture import DEFAULT_CAP, CappedStream
from watchdogs.result import CheckResult, Status, parse_plugin_output
from watchdogs.textsafe import bounded, masked

KILL_GRACE_S = 5.0
DRAIN_S = 10.0
"""After the drop-in and its leftovers are gone, how long the output readers may take."""
TIMEOUT = "timeout"
SHUTDOWN = "shutdown"
REAPER = reaper.__file__


class DropInProcess:
    """One run. `run()` blocks until the process ends and returns its result, or None when
    the scheduler cut it off on shutdown (that run counts as not run). `kill()` may be called
    from any thread."""

    def __init__(self, argv: Sequence[str], timeout: float, log_path: Path,
                 env: Mapping[str, str], cwd: Path, output_cap: int = DEFAULT_CAP,
                 keep_fds: Sequence[int] = (), started: Callable[[int], None] | None = None) -> None:
        self.argv = tuple(argv)
        self.timeout = timeout
        self.log_path = log_path
        self.env = dict(env)
        self.cwd = cwd
        self.output_cap = output_cap
        self.keep_fds = tuple(keep_fds)
        """Open files the run holds while it lives (its item's lock), beyond the scheduler."""
        self.started = started
        """Told the reaper's pid (its process group) once it runs: the item lock's note."""
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._why: str | None = None

    def run(self) -> CheckResult | None:
        ownfiles.make_dirs(self.log_path.parent)
        started = time.monotonic()
        # A new file, 0600 whatever the umask, never through a link planted at its name.
        with os.fdopen(ownfiles.create_private(self.log_path), "wb") as out:
            try:
                code, output, errors = self._run(out)
            except OSError as exc:
                code, output, errors = None, "", f"cannot run {self.argv[0]}: {exc.strerror or exc}"
        leftovers = self._leftovers()
        result = _masked(self._result(code, output, errors))
        if result is not None and leftovers:
            result = _with_leftovers(result, leftovers)
        self._append_footer(errors, code, time.monotonic() - started, result, leftovers)
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

    def _run(self, out: BinaryIO) -> tuple[int | None, str, str]:
        """(exit code or None, stdout kept, stderr kept)."""
        self._report_path().unlink(missing_ok=True)
        with self._lock:
            if self._why is not None:
                return None, "", ""  # shut down before it started
            # A session of its own, so a timeout kills the drop-in's children too; below the
            # reaper, so children that leave the session are killed as well.
            argv = [sys.executable, "-I", "-S", REAPER, str(self._report_path()), *self.argv]
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, cwd=self.cwd, env=self.env,
                                          start_new_session=True, pass_fds=self.keep_fds)
        if self.started is not None:
            self.started(self._proc.pid)
        assert self._proc.stdout is not None and self._proc.stderr is not None
        stdout = CappedStream(self._proc.stdout, out, self.output_cap)
        stderr = CappedStream(self._proc.stderr, None, self.output_cap)
        timer = threading.Timer(self.timeout, self.kill, args=(TIMEOUT,))
        timer.daemon = True
        timer.start()
        code = self._proc.wait()
        timer.cancel()
        if self._why is not None:
            self._signal_group(self._proc, signal.SIGKILL)  # stragglers of a killed run
        for stream in (stdout, stderr):
            stream.join(DRAIN_S)
        out.write(stdout.rest())
        return code, stdout.text(), stderr.text()

    def _leftovers(self) -> list[str]:
        """"pid command" of each process the drop-in left behind (killed by the reaper)."""
        try:
            lines = self._report_path().read_text(errors="replace").splitlines()
        except OSError:
            return []
        self._report_path().unlink(missing_ok=True)
        return [line for line in lines if line.strip()]

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
            # reports a plugin timeout by default (service_check_timeout_state=c). Its last
            # line of output says where it was when it hung.
            last = [f"its last output: {line}" for line in output.strip().splitlines()[-1:]]
            return CheckResult(Status.CRITICAL, f"killed after {humanize.duration(self.timeout)} "
                               "(timeout): process group terminated", tuple(last))
        if code is None:
            return CheckResult(Status.UNKNOWN, errors.strip() or f"cannot run {self.argv[0]}")
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return CheckResult(Status.UNKNOWN, humanize.killed_by(-code), tuple(first),
                               context={"killed_by": name}, killed_by=name)
        if not output.strip() and errors.strip():
            output = errors.strip().splitlines()[-1]  # no stdout: the last error line says why
            return parse_plugin_output(code, output)
        result = parse_plugin_output(code, output)
        why = errors.strip().splitlines()[-1:] if result.status is not Status.OK else []
        if why and why[0] not in (result.summary, *result.details):
            # A failing script's first stdout line is often progress ("checking the mirror")
            # and its reason on stderr (rsync's, a traceback's last line): the alert needs it.
            result = dataclasses.replace(result, details=(*result.details, f"stderr: {why[0]}"))
        return result

    def _append_footer(self, errors: str, code: int | None, elapsed: float,
                       result: CheckResult | None, leftovers: Sequence[str]) -> None:
        lines = []
        if errors.strip():
            lines.append("--- stderr ---\n" + errors.rstrip("\n"))
        if leftovers:
            lines.append("--- left running after exit, killed ---\n" + "\n".join(leftovers))
        verdict = result.status.name if result else "interrupted (scheduler stopped)"
        lines.append(f"--- {' '.join(self.argv)}: exit {code} after {elapsed:.2f}s: {verdict}")
        with os.fdopen(ownfiles.create_private(self.log_path, append=True), "a") as fh:
            fh.write("\n" + "\n".join(lines) + "\n")

    def _report_path(self) -> Path:
        return self.log_path.with_name(self.log_path.name + ".leftovers")


def _with_leftovers(result: CheckResult, leftovers: Sequence[str]) -> CheckResult:
    """The run's result, saying what it left running: at least a WARNING, as leaked
    processes pile up in the scheduler's job until they are found."""
    count = len(leftovers)
    summary = (f"{result.summary} (left {count} process{'es' if count != 1 else ''} running "
               "after it exited: killed)")
    status = max(result.status, Status.WARNING) if result.status != Status.UNKNOWN else result.status
    return dataclasses.replace(result, status=status, summary=summary,
                               details=(*result.details, *(f"killed leftover: {x}" for x in leftovers)))


def _masked(result: CheckResult | None) -> CheckResult | None:
    """A drop-in's words with the channels' secrets masked and each field bounded before
    anything stores or shows them: a drop-in that prints the SMTP password must not put it
    into the state database, `status`, `alerts` or a message; a 50 MB line is not stored."""
    if result is None:
        return None
    return dataclasses.replace(result, summary=bounded(masked(result.summary)),
                               details=tuple(bounded(masked(d)) for d in result.details))
