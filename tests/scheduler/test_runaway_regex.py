"""Nothing freezes the scheduler: a user regex that backtracks for ever (nested repeats)
against a real log, under the real `watchdogs run --once` and the foreground `run`.
Before, Python's `re` held the GIL: the check's timeout never fired, the heartbeat went
stale and SIGINT was ignored (SIGKILL was needed)."""
from __future__ import annotations

import signal
import subprocess

import pytest

from tests.helpers import wait_for
from tests.scheduler.conftest import Site
from watchdogs.config.options import regex
from watchdogs.slurmctl.jobspec import JobSpec
from watchdogs.slurmctl.squeue import JobRow
from watchdogs.userregex import RegexTimeout

RUNAWAY = "iter ((?:a|aa)+)$"   # Fibonacci many ways to split a run of a's; the '!' fails them all


def _site(site: Site) -> None:
    (site.root / "train.log").write_text("iter " + "a" * 100 + "!\n")
    site.write_config(f"check_timeout = \"10s\"\n[[check]]\nname = \"train\"\ntype = \"log_stale\"\n"
                      f"path = \"train.log\"\nmax_age = \"1h\"\nevery = \"2s\"\nprogress = '{RUNAWAY}'\n")


@pytest.mark.timeout(120)
def test_a_runaway_progress_regex_is_unknown_in_words_and_run_once_ends(site: Site) -> None:
    _site(site)
    done = site.watchdogs("run", "--once", timeout=60)       # before: still running after 60 s
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"UNKNOWN  train: train: the pattern /{RUNAWAY}/ took longer than 1 s" in done.stdout
    assert "simplify it" in done.stdout


@pytest.mark.timeout(120)
def test_sigint_stops_the_foreground_scheduler_while_the_regex_runs(site: Site) -> None:
    _site(site)
    proc = site.popen("run")
    try:
        wait_for(lambda: "train" in site.log(), 60, 0.2, "the first run of the check")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)                          # before: needed SIGKILL
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert code in (0, 130), site.log()
    assert "scheduler instance ended: interrupted (SIGINT)" in site.log()


def test_a_runaway_job_regex_raises_a_clear_error_instead_of_freezing() -> None:
    spec = JobSpec(job_regex=regex()("(?:x|xx)+y"))
    row = JobRow(**{**_row_fields(), "name": "x" * 60})
    with pytest.raises(RegexTimeout, match="took longer than 1 s on job name"):
        spec.matches(row, None)


def _row_fields() -> dict[str, object]:
    import dataclasses

    return {f.name: ("" if f.type in ("str", str) else None) for f in dataclasses.fields(JobRow)}


def _alive(marker: str) -> list[int]:
    return [int(p) for p in subprocess.run(["pgrep", "-f", marker], capture_output=True,
                                           text=True).stdout.split()]


@pytest.mark.timeout(60)
def test_sigterm_stops_run_once_and_its_dropin_instead_of_orphaning_it(site: Site) -> None:
    """Before, SIGTERM ended `run --once` at once (no handler) and left its drop-in running:
    drop-ins run in sessions of their own, so nothing else would ever stop them."""
    marker = f"harm-term-{site.job_name}"
    site.dropin(marker, "#!/bin/sh\nsleep 300\n")     # the shell's command line names it
    proc = subprocess.Popen([*site_cmd(site), "run", "--once"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=site.env(), cwd=site.root)
    try:
        wait_for(lambda: _alive(marker), 30, 0.1, "the drop-in to start")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert "run --once interrupted (SIGTERM): the running drop-ins were stopped" in err
    wait_for(lambda: not _alive(marker), 10, 0.1, "the drop-in to be gone")


def site_cmd(site: Site) -> list[str]:
    import sys

    return [sys.executable, "-m", "watchdogs", "--config", str(site.config)]


@pytest.mark.timeout(60)
def test_a_logfile_channel_pointed_at_a_fifo_does_not_freeze_run_once(site: Site) -> None:
    """Before, opening a FIFO nobody reads blocked the delivery, and `run --once`, for ever."""
    import os

    os.mkfifo(site.root / "alerts.log")
    site.write_config('[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n')
    site.dropin("disk", "#!/bin/sh\necho disk on fire\nexit 2\n")
    done = site.watchdogs("run", "--once", timeout=40)
    assert done.returncode == 2 and "CRITICAL cron.hourly/disk: disk on fire" in done.stdout
    assert "a FIFO, not a regular file" in done.stderr
