"""Helpers for the built-in check tests: a real config file through the real loader and
entry points, a real state database, and one tick that runs the checks together."""
from __future__ import annotations

import textwrap
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from watchdogs.checks.base import Check, run_check
from watchdogs.checks.context import TickContext
from watchdogs.config import Config, load_config
from watchdogs.plugins import CHECKS_GROUP, load_group
from watchdogs.result import CheckResult
from watchdogs.state.store import StateStore


def write_config(folder: Path, body: str) -> Config:
    path = folder / "watchdogs.toml"
    path.write_text("[scheduler]\nstate_dir = \"state\"\n" + textwrap.dedent(body))
    return load_config(path)


def build_checks(config: Config) -> list[Check]:
    classes = load_group(CHECKS_GROUP).classes
    return [classes[c.type](c) for c in config.checks]


def tick(config: Config, store: StateStore, now: datetime | None = None,
         only: tuple[str, ...] | None = None, env: dict[str, str] | None = None
         ) -> tuple[dict[str, CheckResult], TickContext]:
    """Run the config's checks (or `only` these) as one scheduler tick would."""
    checks = [c for c in build_checks(config) if only is None or c.name in only]
    ctx = TickContext(now or datetime.now().astimezone(), store, checks, env, config)
    return {c.name: run_check(c, ctx) for c in checks}, ctx


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    db = StateStore(tmp_path / "state")
    yield db
    db.close()
