"""The guard's way out of the process, each side effect in one small method: the exit-code
file, the self-requeue, leaving torch.distributed, and the exit itself."""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NoReturn, Protocol

from trainguard import _files, _text
from trainguard.stopping.agreement import Agreement
from trainguard.stopping.fast_exit import FastExit

log = logging.getLogger("trainguard")


def write_exit_file(path: Path, code: int, why: str = "") -> None:
    """The code on the first line (what the batch script acts on); on the second, in words,
    what happened, for the script's own log line: exit 140 is a requeue with a checkpoint
    saved, or (a hang) a requeue without one, and the script cannot tell them apart. The
    third, `step=JOB.STEP`, names the job step that wrote it: `inplace reap` ends that step
    only, never a sidecar step of the same job (the templates read lines 1 and 2)."""
    words = _text.one_line(" ".join(why.split()))
    step = step_of(os.environ)
    try:
        _files.clean_stale(path)
        _files.write_atomic(path, f"{code}\n{words}\n" + (f"step={step}\n" if step else ""), 0o644)
    except OSError as exc:
        log.error("trainguard: cannot write the exit code to %s: %s", path, exc)


def step_of(env: Mapping[str, str]) -> str:
    """"JOB.STEP" of the srun step this process runs in; "" outside one (the batch or extern
    step: their ids are 4294967290 and up on some releases)."""
    job, step = env.get("SLURM_JOB_ID", ""), env.get("SLURM_STEP_ID", "")
    if job.isdigit() and step.isdigit() and int(step) < 4294967290:
        return f"{job}.{step}"
    return ""


def step_in_exit_file(text: str) -> str:
    """The `step=` line of an exit file; "" when it has none (an older trainguard)."""
    for line in text.splitlines()[2:]:
        if line.startswith("step="):
            return line[len("step="):].strip()
    return ""


def destroy_process_group(agreement: Agreement | None) -> None:
    """Leave torch.distributed cleanly before exiting (avoids the 'process group was not
    destroyed' warning and a hang in some backends' atexit teardown)."""
    if agreement is None:
        return
    try:
        agreement.leave()
    except Exception as exc:  # noqa: BLE001 - exiting anyway; a teardown error is not worth a crash
        log.debug("trainguard: destroy_process_group: %s", exc)


class Requeued(Protocol):
    @property
    def why(self) -> str:
        """What the requeue did (or why none), in words for the log."""


class ProcessExit:
    """`requeue` is the shared requeue (trainguard.recovery.requeue.requeue), handed in by the
    Guard: stopping sits below recovery, which records refused exclusions and suspects."""

    def __init__(self, exit_file: Path | None, fast_exit: FastExit,
                 requeue: Callable[[str], Requeued]) -> None:
        self.exit_file = exit_file
        self.fast_exit = fast_exit
        self._requeue = requeue

    def write_code(self, code: int, rank: int, why: str = "") -> None:
        # For launchers that replace the workers' exit codes by their own (torchrun exits 1
        # when a worker exits 140): the batch script reads the real code from this file.
        if self.exit_file is not None and rank == 0:
            write_exit_file(self.exit_file, code, why)

    def requeue(self, job_id: str) -> None:
        # Only without the batch script template (which requeues on exit 140 itself), and
        # from one rank only: one requeue per job.
        # The shared requeue (trainguard/recovery/requeue.py): none on top of Slurm's own after a
        # preemption on 24.11+, which would requeue the next run too.
        try:
            outcome = self._requeue(job_id)
        except Exception as exc:  # noqa: BLE001 - a failed requeue must not hide the exit code
            log.error("trainguard: scontrol requeue %s failed: %s", job_id, exc)
            return
        log.warning("trainguard: job %s: %s", job_id, outcome.why)

    def exit(self, code: int, rank: int, agreement: Agreement | None, why: str = "") -> NoReturn:
        # sys.exit, not os._exit: the training's finally blocks and atexit handlers (log
        # flushing, experiment trackers) still run (fast_exit.py then skips the slow
        # finalisation); the exit code tells the batch script whether to requeue (140).
        self.write_code(code, rank, why)
        self.leave(code, agreement)

    def leave(self, code: int, agreement: Agreement | None) -> NoReturn:
        # The exit without the exit file (Guard.exit, a finished training): the launcher's
        # code stands, so a rank that failed after rank 0 finished is not called a success.
        destroy_process_group(agreement)
        self.fast_exit.arm(code)
        sys.exit(code)
