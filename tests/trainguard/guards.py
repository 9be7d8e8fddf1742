"""Guards in the test process: a stand-in training, the `make_guard` fixture (registered in
conftest.py) and a step loop on an injected clock."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.trainguard.support import ManualClock
from trainguard import Guard, config_from
from trainguard.slurm.job import JobEnv

NO_JOB = JobEnv()


class Training:
    """A stand-in for the user's state: what the guard saved and loaded."""

    def __init__(self, clock: ManualClock, save_seconds: float = 0.0) -> None:
        self.clock, self.save_seconds = clock, save_seconds
        self.saved: list[Path] = []
        self.loaded: list[Path] = []

    def save(self, directory: Path) -> None:
        (directory / "w").write_text("weights")
        self.clock.advance(self.save_seconds)
        self.saved.append(directory)

    def load(self, directory: Path) -> None:
        self.loaded.append(directory)


@pytest.fixture
def make_guard(tmp_path: Path) -> Iterator[Any]:
    guards: list[Guard] = []

    def make(clock: ManualClock, training: Training | None = None, job: JobEnv = NO_JOB,
             **settings: Any) -> Guard:
        settings.setdefault("checkpoint_dir", tmp_path / "ckpt")
        settings.setdefault("forced_exit", 0)
        settings.setdefault("fast_exit", False)   # would end pytest itself with the guard's code
        training = training or Training(clock)
        guard = Guard(config_from({}, **settings), save=training.save, load=training.load,
                      clock=clock, wall=lambda: clock.now + 1.7e9, job=job)
        guards.append(guard)
        return guard
    yield make
    for guard in guards:
        guard.finish()


def run_steps(guard: Guard, clock: ManualClock, first: int, last: int, seconds: float):
    """Steps of `seconds` each until the guard decides something; (step, decision)."""
    for step in range(first, last):
        clock.advance(seconds)
        decision = guard.check(step)
        if decision is not None:
            return step, decision
    return last, None
