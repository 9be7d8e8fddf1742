"""A scheduler that crashes mid-run leaves an orphan: the run it started keeps going and
holds the item's lock. The restarted scheduler waits for it, names it, and ends it once it
has run past its timeout (plus a grace). Never two runs of one item at once."""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import accounted, sh, wait_for
from tests.scheduler.conftest import Site, script
from watchdogs.scheduler.itemlock import lock_path


def alive(pid: int) -> bool:
    """A zombie is dead: only its parent (init, after the crash) has not reaped it yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def marks_of(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_an_orphan_past_its_timeout_is_ended_and_said_and_only_then_run_again(site: Site) -> None:
    marks = site.root / "marks"
    site.dropin("stuck", script(f"# watchdogs: timeout=2s\necho start $$ $PPID >> {marks}\nexec sleep 300"))
    first = site.popen("run")
    try:
        wait_for(lambda: marks_of(marks), timeout=30, what="the first run started")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    _, dropin, reaper = marks_of(marks)[0]
    note = json.loads(lock_path(site.state, "cron.hourly/stuck").read_text())
    assert note["child_pid"] == note["pgid"] == int(reaper), note  # the note names the orphan
    assert alive(int(dropin)), "the orphan should outlive its crashed scheduler"

    second = site.popen("run")
    try:
        wait_for(lambda: len(marks_of(marks)) >= 2, timeout=40, what="the item run again")
        # The second run started only once the orphan was gone.
        assert not alive(int(dropin)) and not alive(int(reaper))
        wait_for(lambda: "ended it" in site.log(), timeout=10, what="the ending said")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
    log = site.log()
    waiting = [line for line in log.splitlines() if "is still going: waiting for it" in line]
    assert waiting and "the run started by the previous instance at" in waiting[0], log
    assert f"(pid {reaper})" in waiting[0], waiting
    ended = [line for line in log.splitlines() if "ended it" in line]
    assert f"the orphaned run of cron.hourly/stuck (pid {reaper}" in ended[0], ended
    assert "ran past its timeout of 2 s" in ended[0] and "SIGTERM" in ended[0], ended


def slow_sbatch(folder: Path, calls: Path) -> dict[str, str]:
    """An `sbatch` first on PATH that notes each call, waits 5 s, then submits for real:
    a controller slow to answer, so the scheduler can be killed while sbatch runs."""
    real = shutil.which("sbatch")
    assert real is not None
    shim = folder / "bin"
    shim.mkdir(mode=0o700, exist_ok=True)
    (shim / "sbatch").write_text(f'#!/bin/sh\necho $$ >> {calls}\nsleep 5\nexec {real} "$@"\n')
    (shim / "sbatch").chmod(0o700)
    return {"PATH": f"{shim}:{os.environ['PATH']}"}


def copies(name: str) -> list[str]:
    return sh("squeue", "--noheader", f"--name={name}", "--states=PENDING,RUNNING,CONFIGURING",
              "-o", "%i").split()


@pytest.mark.slurm
def test_a_scheduler_killed_while_a_resubmit_sbatch_runs_leaves_exactly_one_job(
        site: Site, slurm_cluster: Path) -> None:
    name = f"wd-orphan-{site.job_name[-8:]}"
    failed = sh("sbatch", "--parsable", f"--job-name={name}", "--output=/dev/null", "--wrap", "exit 3"
                ).strip().split(";")[0]
    (site.root / "train.slurm").write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nsleep 300\n")
    site.write_config(f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\nevery = "2s"\n'
                      f'resubmit = "train.slurm"\nfail_fast = "0s"\n', hourly="1h")
    calls = site.root / "sbatch-calls"
    env = {**site.env(), **slow_sbatch(site.root, calls)}
    scheduler = functools.partial(start_scheduler, site, env)

    wait_for(lambda: accounted(failed), timeout=90, what="accounting has the failed run")
    try:
        first = scheduler("first.log")
        try:
            wait_for(calls.exists, timeout=60, what="the resubmit's sbatch started")
        finally:
            first.send_signal(signal.SIGKILL)  # while sbatch waits on the controller
            first.wait(10)
        orphan = int(calls.read_text().split()[0])  # the shim execs sbatch: the same pid
        second = scheduler("scheduler.log")
        try:
            wait_for(lambda: not alive(orphan), timeout=30, what="the orphaned sbatch done")
            # The restarted scheduler looks again once the orphan is gone, and finds the job.
            wait_for(lambda: f"running: {name}" in site.log(), timeout=30, what="the job seen running")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
        assert len(copies(name)) == 1, copies(name)
        assert len(calls.read_text().split()) == 1, calls.read_text()
        said = [line for line in site.log().splitlines() if "is still going" in line]
        assert "the run started by the previous instance at" in said[0], said
        assert f"(pid {orphan})" in said[0], said
    finally:
        sh("scancel", f"--name={name}", check=False)


def start_scheduler(site: Site, env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
    """`watchdogs run` in the background, its output in `log` under the site."""
    argv = [sys.executable, "-m", "watchdogs", "--config", str(site.config), "run"]
    with open(site.root / log, "w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=site.root)


@pytest.mark.slurm
def test_a_scheduler_killed_while_a_slurm_dropins_sbatch_runs_leaves_exactly_one_job(
        site: Site, slurm_cluster: Path) -> None:
    """The orphaned sbatch submits after its scheduler died: its job id, written into the run
    log, is taken as the item's job by the next run, which does not submit a twin."""
    name = f"wd-orphan-{site.job_name[-8:]}"
    site.dropin("train.slurm", f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --output=/dev/null\n"
                               "sleep 300\n")
    calls = site.root / "sbatch-calls"
    env = {**site.env(), **slow_sbatch(site.root, calls)}
    scheduler = functools.partial(start_scheduler, site, env)

    try:
        first = scheduler("first.log")
        try:
            wait_for(calls.exists, timeout=60, what="the drop-in's sbatch started")
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        orphan = int(calls.read_text().split()[0])
        second = scheduler("scheduler.log")
        try:
            wait_for(lambda: not alive(orphan), timeout=30, what="the orphaned sbatch done")
            job = copies(name)
            wait_for(lambda: f"previous job {job[0]} still" in site.log(), timeout=30,
                     what="the orphan's job taken as the item's")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
        assert len(copies(name)) == 1, copies(name)
        assert len(calls.read_text().split()) == 1, calls.read_text()
        assert f"(pid {orphan}) is still going: waiting for it" in site.log(), site.log()
    finally:
        sh("scancel", f"--name={name}", check=False)
