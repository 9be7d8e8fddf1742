"""Requeue-loop protection: a chain of restarts that make no progress must end.

A job that is requeued, resumes at step N, and stops (or dies) before finishing a step
would be requeued forever. At each start inside a SLURM job the guard records (chain,
resume step, starts at that step) next to the checkpoints; when the same chain starts from
the same step `max_restarts_without_progress` + 1 times in a row, it exits with
EXIT_NO_PROGRESS (never 140) and a message saying why. A new submission is a new chain.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainguard import _files

if TYPE_CHECKING:
    from trainguard.slurm.job import JobEnv

PROGRESS_FILE = ".trainguard-progress.json"


@dataclass(frozen=True)
class Progress:
    chain: str
    step: int      # the step resumed from (-1: a fresh start)
    starts: int    # consecutive starts of this chain at this step

    @property
    def restarts_without_progress(self) -> int:
        return self.starts - 1


def next_progress(previous: Progress | None, chain: str, step: int) -> Progress:
    if previous is not None and previous.chain == chain and previous.step == step:
        return Progress(chain, step, previous.starts + 1)
    return Progress(chain, step, 1)


def is_stuck(progress: Progress, max_restarts_without_progress: int) -> bool:
    return progress.restarts_without_progress >= max_restarts_without_progress


def read_progress(directory: Path) -> Progress | None:
    try:
        data = json.loads((Path(directory) / PROGRESS_FILE).read_text())
        return Progress(str(data["chain"]), int(data["step"]), int(data["starts"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_progress(directory: Path, progress: Progress) -> None:
    target = Path(directory) / PROGRESS_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    _files.clean_stale(target)
    _files.write_atomic(target, json.dumps(asdict(progress)), 0o644)


def stuck_message(progress: Progress, path: Path) -> str:
    where = "a fresh start" if progress.step < 0 else f"step {progress.step}"
    return (f"trainguard: job chain {progress.chain} has started from {where} "
            f"{progress.starts} times in a row without saving a newer checkpoint; not training "
            f"and not requeuing again. Find out why it stops (see the earlier restarts' logs), then "
            f"resubmit (a new job is a new chain) or remove {path / PROGRESS_FILE}.")


def record_start(root: Path | None, job: JobEnv, step: int, rank: int, limit: int) -> str | None:
    """Update the record of a start at `step` (rank 0 writes it); the stuck message if this
    start is one too many (`limit`: max_restarts_without_progress). Only inside a job."""
    if root is None or not job.job_id:
        return None
    progress = next_progress(read_progress(root), job.chain_id, step)
    if is_stuck(progress, limit):
        return stuck_message(progress, root)
    if rank == 0:
        write_progress(root, progress)
    return None
