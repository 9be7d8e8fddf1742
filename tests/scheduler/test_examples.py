"""The drop-ins shipped in the repository's cron.d/examples: off until copied in, then found, safe,
and speaking the contract."""
from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from watchdogs.config.model import CronPeriods
from watchdogs.dropins.crontab import parse_crontab
from watchdogs.dropins.discovery import discover
from watchdogs.dropins.execute import DropInProcess
from watchdogs.result import Status

CRON = REPO / "cron.d"
EXAMPLES = CRON / "examples"
PERIODS = CronPeriods(3600.0, 86400.0, 604800.0)


def writable_by_others(folder: Path) -> bool:
    return any(stat.S_IMODE(p.stat().st_mode) & 0o022 for p in [folder, *folder.rglob("*")])


def test_the_checkouts_cron_d_runs_no_example_until_one_is_copied_in() -> None:
    """A config beside the checkout finds its cron.d: none of the examples may run from it (one
    submits a job every week, into the user's allocation) until the user enables it."""
    if writable_by_others(CRON):
        pytest.skip("this checkout is group/other-writable (umask 002): everything would be refused")
    found = discover(CRON, PERIODS)
    assert (found.dropins, found.refused) == ((), ())
    shipped = sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("cron.*/*"))
    assert shipped == ["cron.daily/my-jobs", "cron.hourly/home-disk", "cron.weekly/node-report.slurm"]


def test_each_example_copied_as_its_readme_says_is_found_and_nothing_else(tmp_path: Path) -> None:
    """cron.d/examples/README's `cp` lines, run as written in a copy of cron.d: each enables one."""
    cron = tmp_path / "cron.d"
    shutil.copytree(CRON, cron)
    for folder in [cron, *cron.rglob("*")]:
        folder.chmod(stat.S_IMODE(folder.stat().st_mode) & ~0o022)
    lines = [ln.split("#", 1)[0].strip() for ln in (EXAMPLES / "README").read_text().splitlines()]
    copies = [shlex.split(ln) for ln in lines if ln.startswith("cp cron.d/examples/")]
    assert len(copies) == 3
    for argv in copies:
        subprocess.run(argv, cwd=tmp_path, check=True, timeout=30)
    found = discover(cron, PERIODS)
    assert found.refused == ()
    assert sorted((d.id, d.kind) for d in found.dropins) == [
        ("cron.daily/my-jobs", "dropin"), ("cron.hourly/home-disk", "dropin"),
        ("cron.weekly/node-report.slurm", "slurm")]


def test_home_disk_example_speaks_the_nagios_convention(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    result = DropInProcess((str(EXAMPLES / "cron.hourly" / "home-disk"),), 30, tmp_path / "a.log", env,
                           tmp_path).run()
    assert result is not None and result.status is Status.OK and result.summary.startswith("HOME DISK OK")
    assert [m.label for m in result.metrics] == ["used"]
    full = DropInProcess((str(EXAMPLES / "cron.hourly" / "home-disk"),), 30, tmp_path / "b.log",
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
