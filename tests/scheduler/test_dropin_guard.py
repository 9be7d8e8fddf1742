"""Drop-ins cannot hurt the watchdog, and one item never runs twice at once: real
processes, real escaped sessions, real concurrent `watchdogs run --once`, real sbatch."""
from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

from tests.helpers import cancel, wait_for
from tests.scheduler.conftest import Site, script


def _alive(marker: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry))
    return found


def test_a_dropin_that_prints_in_a_loop_writes_at_most_the_cap_with_head_tail_and_mark(site: Site) -> None:
    site.dropin("noisy", script("# watchdogs: timeout=3s\nyes 'line of noise'"))
    data = json.loads(site.watchdogs("run", "--once", "--json").stdout)
    (item,) = data["items"]
    log = Path(item["log"]).read_bytes()
    assert len(log) < (1 << 20) + 4096, len(log)
    assert log.startswith(b"line of noise\n")
    assert b" bytes cut: a run keeps its first and last 524288 bytes ...]" in log
    # The kept output ends where the first footer section starts ("--- left running after
    # exit" comes before the verdict line when the group's kill reaches `yes` last).
    tail = log.split(b"bytes ...]\n", 1)[1].split(b"\n--- ", 1)[0]
    assert 500_000 < len(tail) <= 524288 and b"line of noise\nline of noise" in tail
    assert item["status"] == "CRITICAL" and "timeout" in item["summary"]


def test_background_and_setsid_children_left_behind_are_killed_and_reported(site: Site) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 7 * 10**6}"
    site.dropin("leaky", script(f"sleep {marker} &\nsetsid sleep {marker}.5 &\n"
                                f"setsid sh -c 'sleep {marker}.25 & exit' \necho 'OK - done'"))
    try:
        data = json.loads(site.watchdogs("run", "--once", "--json").stdout)
        (item,) = data["items"]
        assert _alive(f"sleep {marker}") == []
        assert item["status"] == "WARNING"
        assert "left 3 processes running after it exited: killed" in item["summary"]
        assert sum(f"sleep {marker}" in d for d in item["details"]) == 3
        assert "--- left running after exit, killed ---" in Path(item["log"]).read_text()
    finally:
        for pid in _alive(f"sleep {marker}"):
            os.kill(pid, signal.SIGKILL)


def test_status_shows_every_file_that_is_not_run_and_why(site: Site) -> None:
    site.dropin("ok", script("echo fine"))
    site.dropin("forgot-chmod", script("echo hi"), mode=0o600)
    hourly = site.cron / "cron.hourly"
    (hourly / "gone").symlink_to(hourly / "no-such-script")
    (hourly / "loop-a").symlink_to(hourly / "loop-b")
    (hourly / "loop-b").symlink_to(hourly / "loop-a")
    site.crontab("@hourly name=.. ok-script\n")
    site.dropin("ok-script", script("echo hi"), folder=".")
    done = site.watchdogs("status")
    text = done.stdout
    assert "NOT RUN (5; each line says why):" in text, text
    assert f"{hourly}/forgot-chmod: not executable, so not run (chmod u+x to run it)" in text
    assert f"{hourly}/gone: dangling symlink (to {hourly}/no-such-script), so not run" in text
    assert f"{hourly}/loop-a: symlink loop, so not run" in text
    assert "name='..' made of letters, digits, '_', '.' and '-', not starting with '.'" in text
    assert not (site.state / "runs" / "crontab" / "..").exists()


def test_two_once_runs_at_the_same_moment_never_run_a_dropin_twice_in_parallel(site: Site) -> None:
    gate = site.root / "gate"
    trace = site.root / "trace"
    site.dropin("slow", script(f"echo start >> {trace}\nwhile [ ! -e {gate} ]; do sleep 0.05; done\n"
                               f"echo end >> {trace}\necho 'OK - slow done'"))
    first = site.popen("run", "--once")
    wait_for(lambda: trace.exists(), timeout=60)
    second = site.watchdogs("run", "--once", "--json")
    gate.touch()
    assert first.wait(60) == 0
    data = json.loads(second.stdout)
    assert data["items"] == []
    (skip,) = data["skipped"]
    assert skip["item"] == "cron.hourly/slow"
    assert skip["reason"].startswith("running in another process (pid ")
    assert trace.read_text() == "start\nend\n"


def test_a_slurm_dropin_is_submitted_once_when_two_processes_run_it_together(
        site: Site, slurm_cluster: Path) -> None:
    site.dropin("job.slurm", f"#!/bin/bash\n#SBATCH --job-name={site.job_name}\n#SBATCH --time=5\n"
                "#SBATCH --hold\nsleep 600\n", folder="cron.daily", mode=0o600)
    runs = [site.popen("run", "--once", "--json") for _ in range(3)]
    for proc in runs:
        proc.wait(90)
    listed = os.popen(f"squeue -h -o %i --name={site.job_name}").read().split()
    try:
        assert len(listed) == 1, (listed, site.log())
    finally:
        cancel(*listed)
