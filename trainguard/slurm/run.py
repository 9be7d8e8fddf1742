"""Run one Slurm client command as an argument list (never a shell string), bounded in time.

trainguard's own copy of the service's runner (it must not import `watchdogs`): every
failure becomes a SlurmError that says what was run and why, so a stopped controller is an
error the caller handles, never a hang of the training loop.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from trainguard.errors import SlurmBusy, SlurmError, SlurmInterrupted

DEFAULT_TIMEOUT_S = 10.0
# Phrases with which slurmctld says "ask me less often" (RPC rate limiting, busy controller).
BUSY_MARKERS = ("rate limit", "Resource temporarily unavailable", "Socket timed out",
                "Slurm backup controller in standby mode", "Zero Bytes were transmitted")


@dataclass(frozen=True)
class Reply:
    argv: tuple[str, ...]
    stdout: str
    stderr: str


# Commands that only read. Slurm signals every process of a job step, so a preemption's TERM
# (and the batch script's forward of it) kills the `scontrol` that asks whether this is a
# preemption: a query so killed is asked again at once. A command that changes something is
# not repeated (it may have taken effect): its caller hears SlurmInterrupted.
QUERIES = (("scontrol", "show"), ("scontrol", "-V"), ("squeue",), ("sinfo",), ("sacct",))
INTERRUPTED_ATTEMPTS = 3


def is_query(cmd: Sequence[str]) -> bool:
    words = (os.path.basename(cmd[0]), *cmd[1:2]) if cmd else ()
    return any(words[:len(q)] == q for q in QUERIES)


def run_slurm(argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S) -> Reply:
    cmd = tuple(argv)
    for _ in range(INTERRUPTED_ATTEMPTS - 1 if is_query(cmd) else 0):
        with contextlib.suppress(SlurmInterrupted):
            return _run_once(cmd, timeout)
    return _run_once(cmd, timeout)


def _run_once(cmd: tuple[str, ...], timeout: float) -> Reply:
    """In a session of its own, whose whole process group is killed on the timeout: a hung
    site wrapper around `scontrol` leaves nothing running in the job."""
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)
    except FileNotFoundError:
        raise SlurmError(f"{cmd[0]}: command not found (is Slurm installed here?)") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise SlurmBusy(f"{cmd[0]} did not answer within {timeout:g}s") from None
    except BaseException:
        _kill_group(proc)
        raise
    return _reply(cmd, subprocess.CompletedProcess(cmd, proc.returncode, out, err))


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5.0)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _reply(cmd: tuple[str, ...], proc: subprocess.CompletedProcess[str]) -> Reply:
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name if -proc.returncode in signal.valid_signals() \
            else f"signal {-proc.returncode}"
        raise SlurmInterrupted(f"{cmd[0]} was killed by {name}")
    if proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        error = SlurmBusy if any(m in proc.stderr for m in BUSY_MARKERS) else SlurmError
        raise error(f"{cmd[0]} failed (exit {proc.returncode}): {message}")
    return Reply(cmd, proc.stdout, proc.stderr)
