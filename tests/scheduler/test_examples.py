"""The drop-ins shipped in the repository's cron.d: found, safe, and speaking the contract."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import REPO
from watchdogs.config.model import CronPeriods
from watchdogs.dropins.crontab import parse_crontab
from watchdogs.dropins.discovery import discover
from watchdogs.dropins.execute import DropInProcess
from watchdogs.result import Status

CRON = REPO / "cron.d"


def test_one_example_per_folder_and_the_readmes_are_skipped() -> None:
    if any(stat.S_IMODE(p.stat().st_mode) & 0o022 for p in [CRON, *CRON.rglob("*")]):
        pytest.skip("this checkout is group/other-writable (umask 002): the examples would be refused")
    found = discover(CRON, CronPeriods(3600.0, 86400.0, 604800.0))
    assert found.refused == ()
    assert sorted((d.id, d.kind) for d in found.dropins) == [
        ("cron.daily/my-jobs", "dropin"), ("cron.hourly/home-disk", "dropin"),
        ("cron.weekly/node-report.slurm", "slurm")]


def test_home_disk_example_speaks_the_nagios_convention(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    result = DropInProcess((str(CRON / "cron.hourly" / "home-disk"),), 30, tmp_path / "a.log", env,
                           tmp_path).run()
    assert result is not None and result.status is Status.OK and result.summary.startswith("HOME DISK OK")
    assert [m.label for m in result.metrics] == ["used"]
    full = DropInProcess((str(CRON / "cron.hourly" / "home-disk"),), 30, tmp_path / "b.log",
                         {**env, "HOME_DISK_WARN": "0", "HOME_DISK_CRIT": "0"}, tmp_path).run()
    assert full is not None and full.status is Status.CRITICAL


def test_crontab_example_is_all_comments_and_every_example_line_parses() -> None:
    text = (CRON / "crontab").read_text()
    entries, problems = parse_crontab(text, CRON)
    assert (entries, problems) == ([], [])
    examples = [line[2:] for line in text.splitlines()
                if line.startswith("# ") and line[2:3] in ("*", "0", "@") and "  " in line]
    entries, problems = parse_crontab("\n".join(examples), CRON)
    assert problems == [] and len(entries) == len(examples) == 5
