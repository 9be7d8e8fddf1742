"""A throwaway site (tests/scheduler's) with a disk check on a folder of its own, Slurm
submission that cleans up after itself, and one real scheduler run (`look`)."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.scheduler.conftest import Site
from tests.trainguard.conftest import cluster  # noqa: F401 - a fixture, registered by importing it


def look(site: Site) -> None:
    """One real scheduler run of every item (as cron would, or the chain at its tick)."""
    done = site.watchdogs("run", "--once", timeout=120)
    assert "Traceback" not in done.stderr, done.stderr


@pytest.fixture
def site(tmp_path: Path) -> Site:
    root = tmp_path / "site"
    for sub in ("cron.d", "cron.d/cron.hourly", "cron.d/cron.daily", "cron.d/cron.weekly"):
        (root / sub).mkdir(parents=True, mode=0o700)
    (root / "scratch").mkdir()
    s = Site(root, f"wdtest-{uuid.uuid4().hex[:8]}")
    s.write_config('\n[[check]]\nname = "scratch"\ntype = "disk"\npath = "scratch"\nwarn = "80%"\n'
                   'crit = "90%"\n')
    return s
