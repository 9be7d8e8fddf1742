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
