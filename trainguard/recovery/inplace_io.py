"""The side effects of `trainguard.recovery.inplace`: asking `python -m trainguard.recovery`, reading
the newest checkpoint, saying things in the job's log, forgetting an ended step's heartbeats."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from trainguard.heartbeat import read_heartbeats

Recovery = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def kv(text: str) -> dict[str, str]:
    """`key=value` lines (later keys win; lines without "=" are left out)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def recovery_cli(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainguard.recovery", *argv], capture_output=True,
                          # backslashreplace: a byte from the record never crashes `after`
                          text=True, errors="backslashreplace", timeout=120, check=False)


def say(text: str) -> None:
    print(f"{time.strftime('%F %T')} trainguard.inplace[{os.environ.get('SLURM_JOB_ID', '')}]: {text}",
          file=sys.stderr, flush=True)


def ask(recovery: Recovery, argv: Sequence[str]) -> tuple[int, dict[str, str], str]:
    done = recovery(argv)
    if done.stderr.strip():
        say(done.stderr.strip())
    return done.returncode, kv(done.stdout), done.stdout


def newest_checkpoint(root: Path | None) -> int:
    if root is None:
        return -1
    try:
        from trainguard.checkpoints.checkpoint import Checkpoints
        latest = Checkpoints(root).latest()
    except Exception as exc:  # noqa: BLE001 - a step for the record only; never block the restart
        say(f"cannot read the checkpoints in {root}: {exc}")
        return -1
    return latest.step if latest is not None else -1


def forget_step_heartbeats(folder: Path | None, job: str) -> None:
    # The old step's rank files would make its frozen rank look frozen in the new step too.
    if folder is None:
        return
    for beat in read_heartbeats(folder):
        if beat.job_id == job:
            try:
                (folder / f"rank-{beat.rank}.json").unlink(missing_ok=True)
            except OSError as exc:
                say(f"cannot remove the old heartbeat of rank {beat.rank}: {exc}")
