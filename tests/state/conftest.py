"""Fixtures for the state tests: the scheduler tests' site (config, cron.d, state)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.scheduler.conftest import site as site
from tests.selfwatch.conftest import tmpfs as tmpfs


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A HOME of the test's own: the per-user index of chains lives under it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
