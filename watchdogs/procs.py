"""Run one outside command (an argument list, never a shell string) bounded in time, and
leave nothing behind: it starts in a session of its own, and on a timeout (or any
interruption) its whole process group is killed, not only the process we started.

A site's wrapper in front of `squeue` is a shell script; when it hangs, killing the shell
alone leaves its `squeue` (and whatever else it forked) running, one more per tick, until
the user's process limit stops the watchdog itself.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

REAP_S = 5.0
"""How long to wait for a killed group's leader to be reaped (SIGKILL: at once, unless it
is stuck in the kernel on a dead mount)."""


def run_bounded(argv: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None,
                input_text: str | None = None, cwd: str | Path | None = None
                ) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, capture_output=True, text=True, timeout=timeout)`, but in a new
    session whose every process is killed on the timeout. Raises TimeoutExpired (after the
    kill) and FileNotFoundError/PermissionError as `subprocess.run` does."""
    stdin = subprocess.PIPE if input_text is not None else subprocess.DEVNULL
    proc = subprocess.Popen(list(argv), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="backslashreplace",
                            env=None if env is None else dict(env), cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(input_text, timeout=max(timeout, 0.001))
    except BaseException:
        kill_group(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL every process of `proc`'s group (it leads its own session), reap it, and
    close the pipes without reading them (a child that left the group may hold them)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    # Stuck in the kernel (a dead mount)? Then it is reaped by the next wait anyone does.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(REAP_S)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
