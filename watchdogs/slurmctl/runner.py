"""Run one Slurm client command as an argument list (never a shell string), bounded in time.

Every failure becomes a SlurmError that says what was run and why it failed, so a check
can report UNKNOWN instead of hanging or claiming the job is gone.
"""
from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from watchdogs.errors import SlurmError
from watchdogs.procs import run_bounded

DEFAULT_TIMEOUT_S = 30.0
# Phrases with which slurmctld says "ask me less often" (RPC rate limiting, busy controller).
BUSY_MARKERS = ("rate limit", "Resource temporarily unavailable", "Socket timed out",
                "Slurm backup controller in standby mode", "Zero Bytes were transmitted")


@dataclass(frozen=True)
class SlurmReply:
    argv: tuple[str, ...]
    stdout: str
    stderr: str


class SlurmBusy(SlurmError):
    """The controller is overloaded or rate-limiting us: back off before asking again."""


class SlurmRunner(Protocol):
    """How a Slurm command is run: `run_slurm`, or in a unit test a function that answers
    with recorded output (the tick carries it: `TickContext.runner`)."""

    def __call__(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S,
                 env: Mapping[str, str] | None = None, input_text: str | None = None) -> SlurmReply: ...


def run_slurm(argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S,
              env: Mapping[str, str] | None = None, input_text: str | None = None) -> SlurmReply:
    """Run it in a process group of its own, killed whole on the timeout (a hung wrapper
    script leaves no `squeue` behind)."""
    cmd = tuple(argv)
    try:
        proc = run_bounded(cmd, timeout, env=os.environ if env is None else env, input_text=input_text)
    except FileNotFoundError:
        raise SlurmError(f"{cmd[0]}: command not found (is Slurm installed here?)") from None
    except subprocess.TimeoutExpired:
        raise SlurmBusy(f"{cmd[0]} did not answer within {timeout:g}s") from None
    if proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        error = SlurmBusy if any(m in proc.stderr for m in BUSY_MARKERS) else SlurmError
        raise error(f"{cmd[0]} failed (exit {proc.returncode}): {message}")
    return SlurmReply(cmd, proc.stdout, proc.stderr)


def within_budget(runner: SlurmRunner, budget: float = DEFAULT_TIMEOUT_S,
                  clock: Callable[[], float] = time.monotonic) -> SlurmRunner:
    """`runner` with one time budget shared by every call: each call gets what is left (at
    most its own timeout), and once it is spent a call fails at once. A tick whose squeue,
    sinfo and sacct all hang then ends within one command timeout, not one per command.
    The budget starts with the first call (a check may first wait for a drop-in)."""
    started: list[float] = []
    lock = threading.Lock()

    def bounded(argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S,
                env: Mapping[str, str] | None = None, input_text: str | None = None) -> SlurmReply:
        with lock:
            if not started:
                started.append(clock())
        left = started[0] + budget - clock()
        if left <= 0.05:
            raise SlurmBusy(f"{argv[0]} not run: the Slurm commands of this tick already took "
                            f"{budget:g}s (Slurm did not answer)")
        return runner(argv, timeout=min(timeout, left), env=env, input_text=input_text)

    return bounded
