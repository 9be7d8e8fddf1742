"""Run one Slurm client command as an argument list (never a shell string), bounded in time.

trainguard's own copy of the service's runner (it must not import `watchdogs`): every
failure becomes a SlurmError that says what was run and why, so a stopped controller is an
error the caller handles, never a hang of the training loop.
"""
from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from trainguard.errors import SlurmBusy, SlurmError

DEFAULT_TIMEOUT_S = 10.0
# Phrases with which slurmctld says "ask me less often" (RPC rate limiting, busy controller).
BUSY_MARKERS = ("rate limit", "Resource temporarily unavailable", "Socket timed out",
                "Slurm backup controller in standby mode", "Zero Bytes were transmitted")


@dataclass(frozen=True)
class Reply:
    argv: tuple[str, ...]
    stdout: str
    stderr: str


def run_slurm(argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S) -> Reply:
    cmd = tuple(argv)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SlurmError(f"{cmd[0]}: command not found (is Slurm installed here?)") from None
    except subprocess.TimeoutExpired:
        raise SlurmBusy(f"{cmd[0]} did not answer within {timeout:g}s") from None
    if proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        error = SlurmBusy if any(m in proc.stderr for m in BUSY_MARKERS) else SlurmError
        raise error(f"{cmd[0]} failed (exit {proc.returncode}): {message}")
    return Reply(cmd, proc.stdout, proc.stderr)
