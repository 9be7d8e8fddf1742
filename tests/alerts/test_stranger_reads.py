"""Messages read as a stranger woken at 3 am would read them (docs/alert-style.md): each
scenario runs `watchdogs run --once` as the user, and the assertions are on what arrives, the
console channel's message (the scheduler job's log) and the logfile line.

- a full disk says which threshold it crossed, and `next:` is the command that shows it;
- a drained node's `next:` shows who drained it, when and why;
- a failing drop-in whose first line is progress shows its stderr's last line, the reason;
- a hung drop-in shows its last line of output, where it was when it hung;
- a drop-in refused for its name says so in words, and the fix is the `mv` that fixes it;
- a hung training names its job, and `next:` tails the log that stopped;
- the watchdog's news about itself (a disabled channel, its config, its state) says what to run."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import admin_scontrol, sh, wait_for


def site(tmp_path: Path, checks: str = "", dropins: dict[str, str] | None = None) -> Path:
    (tmp_path / "watchdogs.toml").write_text(f"""
[scheduler]
state_dir = "state"
dropin_timeout = "2s"
[alerts]
notify = ["log", "console"]
[[notify]]
name = "log"
type = "logfile"
path = "alerts.log"
[[notify]]
name = "console"
type = "console"
{checks}""")
    hourly = tmp_path / "cron.d" / "cron.hourly"
    hourly.mkdir(parents=True)
    for name, body in (dropins or {}).items():
        (hourly / name).write_text("#!/bin/bash\n" + body)
        (hourly / name).chmod(0o755)
    return tmp_path


def run_once(folder: Path) -> tuple[str, str]:
    """(what the console channel printed, the logfile's lines) after one `run --once`."""
    done = subprocess.run([sys.executable, "-m", "watchdogs", "run", "--once"], cwd=folder,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert (folder / "alerts.log").exists(), done.stdout + done.stderr
    return done.stdout, (folder / "alerts.log").read_text()


def block(console: str, item: str) -> str:
    """The lines of one item's block in the console message (from its heading to the next)."""
    match = re.search(rf"^(CRITICAL|WARNING|UNKNOWN): {re.escape(item)}\n(.*?)(?=^\S|\Z)", console,
                      re.M | re.S)
    assert match, console
    return match.group(0)


def test_a_full_disk_says_which_threshold_it_crossed_and_how_to_look(tmp_path: Path) -> None:
    folder = site(tmp_path, f"""
[[check]]
name = "scratch"
type = "disk"
path = "{tmp_path}"
warn = "0.001%"
crit = "0.002%"
inodes_warn = "0.0001%"
""")
    console, log = run_once(folder)
    said = block(console, "scratch")
    assert re.search(r"bytes .* used \(\d+ %\) CRITICAL \(threshold 0\.002 %\)", said), said
    assert re.search(r"inodes .* used \(\d+ %\) WARNING \(threshold 0\.0001 %\)", said), said
    assert f"next:  df -h {tmp_path}; df -i {tmp_path}   (on " in said, said
    assert "CRITICAL (threshold 0.002 %)" in log


def test_a_failing_drop_in_shows_the_reason_its_stderr_gives(tmp_path: Path) -> None:
    folder = site(tmp_path, dropins={"mirror": "echo 'checking the dataset mirror'\n"
                                               "echo 'rsync: connection refused (111)' >&2\nexit 2\n"})
    console, _log = run_once(folder)
    said = block(console, "cron.hourly/mirror")
    assert "what:  checking the dataset mirror" in said
    assert "| stderr: rsync: connection refused (111)" in said, said


def test_a_hung_drop_in_shows_where_it_was_when_it_was_killed(tmp_path: Path) -> None:
    folder = site(tmp_path, dropins={"scan": "echo 'starting the scan'\necho 'scanning /lustre/proj'\n"
                                             "sleep 60\n"})
    console, log = run_once(folder)
    said = block(console, "cron.hourly/scan")
    assert "killed after 2 s (timeout)" in said
    assert "| its last output: scanning /lustre/proj" in said, said
    assert "WATCHDOGS CRITICAL cron.hourly/scan" in log


def test_a_drop_in_refused_for_its_name_says_why_in_words_and_the_fix_renames_it(tmp_path: Path) -> None:
    folder = site(tmp_path, dropins={"check.sh": "echo OK\n"})
    console, log = run_once(folder)
    path = tmp_path / "cron.d" / "cron.hourly" / "check.sh"
    said = block(console, f"watchdogs:refused:{path}")
    assert f"what:  {path} will not run: its name holds '.'; like cron's run-parts" in said, said
    assert f"next:  mv {path} {path.with_name('check')}" in said, said
    assert "name not run" not in log and f"{path} will not run: its name holds '.'" in log


@pytest.fixture
def drained(slurm_cluster: Path) -> Iterator[str]:
    node = "node3"
    admin_scontrol("update", f"NodeName={node}", "State=DRAIN", "Reason=xid 79 on GPU 2")
    try:
        yield node
    finally:
        admin_scontrol("update", f"NodeName={node}", "State=RESUME")
        wait_for(lambda: sh("sinfo", "-h", "-N", "-n", node, "-o", "%T").split()[0] in ("idle", "mixed"),
                 what=f"{node} back")


@pytest.mark.slurm
def test_a_drained_nodes_next_step_shows_who_drained_it_when_and_why(tmp_path: Path, drained: str) -> None:
    folder = site(tmp_path, '[[check]]\nname = "nodes"\ntype = "nodes"\n')
    console, log = run_once(folder)
    said = block(console, "nodes")
    assert f"{drained} drained: xid 79 on GPU 2 (by root since" in said, said
    assert f"next:  sinfo -R -n {drained}; scontrol show node {drained}   (on " in said, said
    assert re.search(rf"WATCHDOGS (WARNING|CRITICAL) nodes \[\w+\] {drained} drained: xid 79", log), log


@pytest.mark.timeout(90)
def test_a_disabled_channel_tells_the_others_what_to_do_next(tmp_path: Path) -> None:
    folder = site(tmp_path, """
[[notify]]
name = "pager"
type = "sms"
account_sid = "AC0123456789abcdef0123456789abcdef"
auth_token_env = "WD_TEST_UNSET_PAGER_TOKEN"
from_number = "+15559990000"
to = ["+15550001111"]
""")
    env = {k: v for k, v in os.environ.items() if k != "WD_TEST_UNSET_PAGER_TOKEN"}
    out = (tmp_path / "scheduler.out").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "watchdogs", "run"], cwd=folder, stdout=out,
                            stderr=subprocess.STDOUT, env={**env, "COLUMNS": "200"})
    try:
        wait_for(lambda: "alert channel pager is disabled" in (tmp_path / "scheduler.out").read_text(),
                 timeout=60, interval=0.2, what="the news that the pager is disabled")
    finally:
        proc.terminate()
        proc.wait(20)
        out.close()
    console = (tmp_path / "scheduler.out").read_text()
    said = block(console, "watchdogs:channel:pager")
    assert "$WD_TEST_UNSET_PAGER_TOKEN" in said, said
    assert ("next:  fix it where the scheduler runs (the chain's environment), then "
            "`watchdogs notify-test pager`") in said, said
    assert "WATCHDOGS CRITICAL watchdogs:channel:pager" in (tmp_path / "alerts.log").read_text()


def test_the_watchdogs_news_about_its_config_and_state_names_the_command_to_run() -> None:
    from datetime import datetime, timezone

    from watchdogs.alerts import selfalerts

    now = datetime(2026, 11, 26, 3, 0, tzinfo=timezone.utc)
    config = selfalerts.config_broken(["bad key"], "/home/me/my wd.toml", now, ["log"])
    state = selfalerts.state_broken("corrupt", "database disk image is malformed", "/scratch/wd state",
                                    now, ["log"])
    assert config.runbook == "watchdogs validate --config '/home/me/my wd.toml'"
    assert state.runbook == "ls -ld '/scratch/wd state'; watchdogs doctor"
    assert selfalerts.config_ok(now, ["log"]).runbook is None  # a resolution has nothing to do


def running_for(job: str) -> int:
    """Seconds the job has run, from squeue's elapsed time ([H:]M:S; a test job runs < 1 day)."""
    elapsed = sh("squeue", "-h", "-j", job, "-o", "%M").strip()
    seconds = 0
    for part in elapsed.split(":") if elapsed else ["0"]:
        seconds = seconds * 60 + int(part)
    return seconds


@pytest.mark.slurm
@pytest.mark.timeout(120)
def test_a_hung_training_names_its_job_and_next_tails_the_log_that_stopped(tmp_path: Path) -> None:
    name = f"wdstale{os.getpid()}"
    folder = site(tmp_path, f"""
[[check]]
name = "train"
type = "job"
job_name = "{name}"
[[check]]
name = "train-hung"
type = "log_stale"
job = "train"
path = "{tmp_path}/train-*.out"
max_age = "1s"
""")
    job = sh("sbatch", "--parsable", f"--job-name={name}", f"--output={tmp_path}/train-%j.out",
             "--wrap", "echo iter 5; sleep 300").strip().split(";")[0]
    try:
        log = tmp_path / f"train-{job}.out"
        wait_for(lambda: log.exists() and log.read_text().strip() == "iter 5", timeout=60,
                 what="the job's log")
        # A run younger than max_age is not judged yet (it had no time to write): let it age.
        wait_for(lambda: running_for(job) >= 3, timeout=30, what="the job running for 3 s")
        os.utime(log, (log.stat().st_mtime - 60, log.stat().st_mtime - 60))  # a minute without a line
        console, alerts = run_once(folder)
    finally:
        sh("scancel", job, check=False)
    said = block(console, "train-hung")
    assert f"what:  hung? {name} (job {job}): {log} last written 1 min" in said, said
    assert f"next:  tail -n 50 {log}   (on " in said, said
    assert "WATCHDOGS CRITICAL train-hung [" in alerts and f"hung? {name} (job {job}): " in alerts
