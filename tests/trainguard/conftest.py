"""Fixtures of the trainguard tests."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.trainguard.guards import make_guard  # noqa: F401 - a fixture, registered by importing it
from tests.trainguard.support import Cluster, digest_of, run_tiny


@pytest.fixture
def cluster(slurm_cluster: Path) -> Iterator[Cluster]:
    """Slurm submission for one test; every job it submitted is cancelled afterwards."""
    jobs = Cluster()
    try:
        yield jobs
    finally:
        jobs.cleanup()


@pytest.fixture(scope="session")
def reference_digest() -> Callable[..., str]:
    """The final weight digest of an uninterrupted local run of train_tiny.py (no Slurm, no
    checkpoints), memoised per argument list."""
    cache: dict[tuple[str, ...], str] = {}

    def digest(*args: str) -> str:
        if args not in cache:
            proc = run_tiny(*args)
            assert proc.returncode == 0, proc.stderr[-3000:]
            cache[args] = digest_of(proc.stdout)
        return cache[args]
    return digest
