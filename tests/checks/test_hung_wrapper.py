"""A site's wrapper in front of squeue/sinfo/sacct/sbatch/scontrol that hangs, and forks
children that hang too: nothing it started outlives the timeout, and a tick whose every
Slurm command hangs ends within one command timeout, not one per command."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from trainguard.slurm import run as trainguard_run
from watchdogs.checks.context import TickContext
from watchdogs.dropins.submit import submit
from watchdogs.errors import SlurmError
from watchdogs.result import Status
from watchdogs.slurmctl.runner import run_slurm
from watchdogs.slurmctl.sacct import run_sacct
from watchdogs.slurmctl.sinfo import run_sinfo
from watchdogs.state.store import StateStore

COMMANDS = ("squeue", "sinfo", "sacct", "sbatch", "scontrol")
WRAPPER = """#!/bin/sh
# A site wrapper that hangs: two children of its own, and a grandchild, all hung.
echo $$ >> "{pids}"
sleep 3600 &
echo $! >> "{pids}"
sh -c 'echo $$ >> "{pids}"; sleep 3600' &
sleep 3600
"""


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent that will reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


@pytest.fixture
def hung_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A bin folder first on PATH with a hanging wrapper for every Slurm command; yields
    the file where every process the wrappers start writes its pid."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pids = tmp_path / "pids"
    pids.touch()
    for name in COMMANDS:
        wrapper = bin_dir / name
        wrapper.write_text(WRAPPER.format(pids=pids))
        wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    yield pids
    for pid in started(pids):  # a failing test must not leave them either
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


def started(pids: Path) -> list[int]:
    return [int(x) for x in pids.read_text().split()]


def assert_nothing_left(pids: Path, at_least: int) -> None:
    found = started(pids)
    assert len(found) >= at_least, f"the wrappers did not start: {found}"
    deadline = time.monotonic() + 5  # SIGKILL is at once; /proc may lag a reap by a moment
    while any(alive(p) for p in found) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in found if alive(p)] == [], "processes left behind by a hung Slurm command"


@pytest.mark.timeout(60)
def test_a_hung_squeue_wrapper_is_killed_with_every_process_it_started(hung_path: Path) -> None:
    started_at = time.monotonic()
    with pytest.raises(SlurmError, match="did not answer within 1s"):
        run_slurm(["squeue", "--me"], timeout=1.0)
    assert time.monotonic() - started_at < 8
    assert_nothing_left(hung_path, at_least=3)


@pytest.mark.timeout(60)
def test_a_tick_whose_every_slurm_command_hangs_ends_within_one_command_timeout(
        hung_path: Path, tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    ctx = TickContext(datetime.now().astimezone(), store, slurm_budget=2.0)
    started_at = time.monotonic()
    failures = []
    for ask in (lambda: run_sinfo(30.0, None, ctx.runner),
                lambda: run_sacct(["1", "2"], 30.0, None, ctx.runner),
                lambda: ctx.runner(["squeue", "--me"], timeout=30.0),
                lambda: ctx.runner(["scontrol", "show", "job", "1"], timeout=30.0)):
        with pytest.raises(SlurmError) as caught:
            ask()
        failures.append(str(caught.value))
    took = time.monotonic() - started_at
    store.close()
    assert took < 2.0 + 6, f"the tick took {took:.1f}s: each command had its own timeout"
    assert "did not answer" in failures[0]
    assert all("not run" in f or "did not answer" in f for f in failures[1:]), failures
    assert_nothing_left(hung_path, at_least=3)


@pytest.mark.timeout(90)
def test_a_hung_sbatch_wrapper_leaves_nothing(hung_path: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("watchdogs.dropins.submit.SBATCH_TIMEOUT_S", 1.0)
    script = tmp_path / "job.slurm"
    script.write_text("#!/bin/sh\ntrue\n")
    result, job_id = submit([str(script)], tmp_path / "runs" / "x.log", dict(os.environ))
    assert (result.status, job_id) == (Status.UNKNOWN, None)
    assert "did not answer" in result.summary
    assert_nothing_left(hung_path, at_least=3)


@pytest.mark.timeout(60)
def test_trainguards_own_runner_leaves_nothing_either(hung_path: Path) -> None:
    with pytest.raises(trainguard_run.SlurmError, match="did not answer"):
        trainguard_run.run_slurm(["scontrol", "requeue", "1"], timeout=1.0)
    assert_nothing_left(hung_path, at_least=3)


@pytest.mark.timeout(120)
def test_run_once_with_every_slurm_command_hung_ends_within_one_timeout(
        hung_path: Path, tmp_path: Path) -> None:
    """The real command line: a job check (squeue, then sacct) and a nodes check (sinfo)."""
    config = tmp_path / "watchdogs.toml"
    config.write_text('[scheduler]\nstate_dir = "state"\njob_name = "wd-hung"\n'
                      '[[check]]\nname = "train"\ntype = "job"\njob_name = "train"\n'
                      '[[check]]\nname = "nodes"\ntype = "nodes"\n')
    for sub in ("cron.d", "cron.d/cron.hourly"):
        (tmp_path / sub).mkdir(mode=0o700)
    started_at = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(config), "run", "--once"],
                          capture_output=True, text=True, timeout=100, cwd=tmp_path, env=dict(os.environ))
    took = time.monotonic() - started_at
    assert "Traceback" not in done.stderr, done.stderr
    assert "UNKNOWN" in done.stdout, done.stdout + done.stderr
    assert took < 30 + 15, f"run --once took {took:.0f}s: more than one Slurm timeout"
    assert_nothing_left(hung_path, at_least=3)
