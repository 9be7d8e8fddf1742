"""A throwaway site for scheduler tests: a config, a cron.d with private permissions, a
state dir, and helpers to write drop-ins and run the real `watchdogs` command."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest

from watchdogs.checks.base import Check
from watchdogs.checks.context import TickContext
from watchdogs.config.options import Option, boolean, duration
from watchdogs.plugins import Registry
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome

PLUGIN = "/usr/lib/nagios/plugins/check_disk"


@dataclass
class Site:
    root: Path
    job_name: str

    @property
    def config(self) -> Path:
        return self.root / "watchdogs.toml"

    @property
    def cron(self) -> Path:
        return self.root / "cron.d"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def write_config(self, extra: str = "", *, tick: str = "1s", hourly: str = "2s") -> Path:
        self.config.write_text(f'[scheduler]\nstate_dir = "state"\ntick = "{tick}"\n'
                               f'job_name = "{self.job_name}"\n{extra}\n'
                               f'[cron]\nhourly = "{hourly}"\ndaily = "1h"\nweekly = "7d"\n')
        return self.config

    def dropin(self, name: str, body: str, folder: str = "cron.hourly", mode: int = 0o700) -> Path:
        path = self.cron / folder / name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(body)
        path.chmod(mode)
        return path

    def crontab(self, text: str) -> Path:
        path = self.cron / "crontab"
        path.write_text(text)
        path.chmod(0o600)
        return path

    def env(self) -> dict[str, str]:
        return {**os.environ, "WATCHDOGS_CONFIG": str(self.config), "WATCHDOGS_PYTHON": sys.executable}

    def watchdogs(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """The real command line, as a user runs it."""
        return subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(self.config), *args],
                              capture_output=True, text=True, timeout=timeout, env=self.env(),
                              cwd=self.root)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        log = open(self.root / "scheduler.log", "w")  # noqa: SIM115 - closed with the process
        return subprocess.Popen([sys.executable, "-m", "watchdogs", "--config", str(self.config), *args],
                                stdout=log, stderr=subprocess.STDOUT, text=True, env=self.env(),
                                cwd=self.root)

    def log(self) -> str:
        path = self.root / "scheduler.log"
        return path.read_text() if path.exists() else ""


@pytest.fixture
def site(tmp_path: Path) -> Site:
    root = tmp_path / "site"
    for sub in ("cron.d", "cron.d/cron.hourly", "cron.d/cron.daily", "cron.d/cron.weekly"):
        (root / sub).mkdir(parents=True, mode=0o700)
        (root / sub).chmod(0o700)
    s = Site(root, f"wdtest-{uuid.uuid4().hex[:8]}")
    s.write_config()
    return s


def script(body: str) -> str:
    return "#!/bin/sh\n" + body.strip("\n") + "\n"


# -- in-process helpers: a check type of the tests' own, and a sink that records ---------

@dataclass
class Probe:
    """What probe checks saw: one entry per run (check name, id of its TickContext), and
    how often the shared snapshot factory ran."""

    runs: list[tuple[str, int]] = field(default_factory=list)
    contexts: list[TickContext] = field(default_factory=list)
    """Every context seen, kept alive so that no two ticks' contexts can share an id."""
    snapshots: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


def probe_registry(probe: Probe) -> Registry:
    class ProbeCheck(Check):
        type_name: ClassVar[str] = "probe"
        options: ClassVar[dict[str, Option]] = {
            "hang": Option(boolean, default=False), "sleep": Option(duration, default=0.0)}

        def run(self, ctx: TickContext) -> CheckResult:
            def snapshot() -> int:
                with probe.lock:
                    probe.snapshots += 1
                return probe.snapshots
            seen = ctx.shared("probe-snapshot", snapshot)
            with probe.lock:
                probe.runs.append((self.name, id(ctx)))
                probe.contexts.append(ctx)
            if self.opts["hang"]:
                probe.release.wait()
            elif self.opts["sleep"]:
                probe.release.wait(self.opts["sleep"])
            return CheckResult(Status.OK, f"snapshot {seen}")

    return Registry("watchdogs.checks", {"probe": ProbeCheck}, {})


@dataclass
class RecordingSink:
    handled: list[list[ItemOutcome]] = field(default_factory=list)
    flushes: list[bool] = field(default_factory=list)

    def handle(self, outcomes: Sequence[ItemOutcome], now: datetime) -> None:
        self.handled.append(list(outcomes))

    def flush(self, now: datetime, force: bool = False) -> None:
        self.flushes.append(force)

    def items(self) -> list[str]:
        return [o.item for batch in self.handled for o in batch]


@pytest.fixture
def probe() -> Iterator[Probe]:
    p = Probe()
    yield p
    p.release.set()  # let any hung probe thread end


def wait_file_lines(path: Path, count: int) -> Any:
    return path.exists() and len(path.read_text().splitlines()) >= count
