"""Helpers for the built-in check tests: a real config file through the real loader and
entry points, a real state database, and one tick that runs the checks together."""
from __future__ import annotations

import re
import socket
import textwrap
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.helpers import job_state, sh, wait_for
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


class Jobs:
    """Submits real jobs and cancels every one of them at teardown, even on failure."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def submit(self, *args: str, name: str = "wdtest", wrap: str = "sleep 300") -> str:
        argv = ["sbatch", "--parsable", f"--job-name={name}", "--output=/dev/null", *args]
        if wrap:
            argv += ["--wrap", wrap]
        job_id = sh(*argv).strip().split(";")[0]
        self.ids.append(job_id)
        return job_id

    def cancel_all(self) -> None:
        if self.ids:
            sh("scancel", *self.ids, check=False)
            wait_for(lambda: all(job_state(i) not in ("RUNNING", "PENDING", "COMPLETING")
                                 for i in self.ids), timeout=30, what="jobs cancelled")


@pytest.fixture
def jobs(slurm_cluster: Path) -> Iterator[Jobs]:
    tracker = Jobs()
    try:
        yield tracker
    finally:
        tracker.cancel_all()


def unreachable_conf(slurm_conf: Path, folder: Path) -> Path:
    """A copy of the cluster's slurm.conf whose controller port nobody listens on: the
    clients fail exactly as with a stopped slurmctld (MessageTimeout=1 keeps it quick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text = re.sub(r"(?m)^SlurmctldPort=.*$", f"SlurmctldPort={port}", slurm_conf.read_text())
    text = re.sub(r"(?m)^MessageTimeout=.*$", "MessageTimeout=1", text)
    copy = folder / "unreachable-slurm.conf"
    copy.write_text(text)
    return copy
