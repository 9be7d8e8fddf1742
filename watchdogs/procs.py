"""Run one outside command (an argument list, never a shell string) bounded in time, and
leave nothing behind: it starts in a session of its own, and on a timeout (or any
interruption) its whole process group is killed, not only the process we started.

A site's wrapper in front of `squeue` is a shell script; when it hangs, killing the shell
alone leaves its `squeue` (and whatever else it forked) running, one more per tick, until
the user's process limit stops the watchdog itself.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REAP_S = 5.0
"""How long to wait for a killed group's leader to be reaped (SIGKILL: at once, unless it
is stuck in the kernel on a dead mount)."""


@dataclass(frozen=True)
class Holding:
    """Open files every child started in this context keeps for its life (a scheduler item's
    lock, so a child orphaned by a crashed scheduler still holds it), and whom to tell each
    child's pid (which is also its process group)."""

    fds: tuple[int, ...]
    started: Callable[[int], None]


_HOLDING: contextvars.ContextVar[Holding | None] = contextvars.ContextVar("watchdogs_holding", default=None)


@contextlib.contextmanager
def children_hold(holding: Holding) -> Iterator[None]:
    """Within this block (this thread), `run_bounded` children inherit `holding.fds`: a
    Slurm command run inside an item (an sbatch) holds that item's lock as the item does."""
    token = _HOLDING.set(holding)
    try:
        yield
    finally:
        _HOLDING.reset(token)


def run_bounded(argv: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None,
                input_text: str | None = None, cwd: str | Path | None = None,
                stdout: int | None = None) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, capture_output=True, text=True, timeout=timeout)`, but in a new
    session whose every process is killed on the timeout. Raises TimeoutExpired (after the
    kill) and FileNotFoundError/PermissionError as `subprocess.run` does. `stdout`: an open
    file for the child's output instead of a pipe (what it says outlives us; stdout is "")."""
    stdin = subprocess.PIPE if input_text is not None else subprocess.DEVNULL
    holding = _HOLDING.get()
    proc = subprocess.Popen(list(argv), stdin=stdin, stdout=subprocess.PIPE if stdout is None else stdout,
                            stderr=subprocess.PIPE,
                            text=True, errors="backslashreplace",
                            env=None if env is None else dict(env), cwd=cwd, start_new_session=True,
                            pass_fds=holding.fds if holding is not None else ())
    if holding is not None:
        holding.started(proc.pid)
    try:
        out, err = proc.communicate(input_text, timeout=max(timeout, 0.001))
    except BaseException:
        kill_group(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out or "", err)


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
