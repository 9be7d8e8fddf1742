"""`job` on the real local cluster: running, queued for benign and bad reasons, gone with
the last state, Slurm unreachable, a Unix group of two users, one squeue for many checks,
and resubmission with its crash-loop limit."""
from __future__ import annotations

import getpass
import json
import os
import stat
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from tests.checks.conftest import Jobs, tick, unreachable_conf, write_config
from tests.helpers import accounted, job_state, sh, wait_for
from watchdogs.result import Status
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm


def one_check(tmp_path: Path, name: str, **opts: str | int) -> str:
    keys = "\n".join(f"{k} = {json.dumps(v)}" for k, v in opts.items())
    return f'[[check]]\nname = "{name}"\ntype = "job"\n{keys}\n'


def unique(tag: str, tmp_path: Path) -> str:
    return f"wd-{tag}-{tmp_path.name[-12:]}"


def test_running_job_is_ok_with_node_and_elapsed_time(tmp_path: Path, store: StateStore,
                                                     jobs: Jobs) -> None:
    name = unique("run", tmp_path)
    job = jobs.submit(name=name)
    wait_for(lambda: job_state(job) == "RUNNING", what="job running")
    config = write_config(tmp_path, one_check(tmp_path, "train", job_name=name))
    result = tick(config, store)[0]["train"]
    assert result.status is Status.OK
    assert result.summary.startswith(f"running: {name} (job {job}) on node")
    assert result.context["job"] == job


def test_pending_on_dependency_is_ok_and_says_what_it_waits_for(tmp_path: Path, store: StateStore,
                                                               jobs: Jobs) -> None:
    name = unique("dep", tmp_path)
    first = jobs.submit("--hold", name=f"{name}-first")
    jobs.submit(f"--dependency=afterok:{first}", name=name)
    config = write_config(tmp_path, one_check(tmp_path, "chain", job_name=name))
    result = wait_for(lambda: (r := tick(config, store)[0]["chain"]).summary.count("dependency") and r,
                      what="dependency reason")
    assert result.status is Status.OK
    assert "waiting on the previous job of its dependency chain" in result.summary
    assert f"afterok:{first}" in result.summary


def test_array_with_task_limit_counts_as_queued_and_names_the_limit(tmp_path: Path, store: StateStore,
                                                                   jobs: Jobs) -> None:
    name = unique("arr", tmp_path)
    array = jobs.submit("--array=1-10%1", name=name)
    config = write_config(tmp_path, one_check(tmp_path, "arr", job_name=name))
    result = wait_for(lambda: (r := tick(config, store)[0]["arr"]).status is Status.OK
                      and "running" in r.summary and r, what="array task running")
    assert f"queued: {array}_[2-10%1]" in result.summary
    assert any("waiting on the array's task limit (1 at a time)" in d for d in result.details)


def test_held_job_is_a_warning_that_says_how_to_release_it(tmp_path: Path, store: StateStore,
                                                          jobs: Jobs) -> None:
    name = unique("held", tmp_path)
    job = jobs.submit("--hold", name=name)
    config = write_config(tmp_path, one_check(tmp_path, "held", job_name=name))
    result = tick(config, store)[0]["held"]
    assert result.status is Status.WARNING
    assert f"held by its user (release with `scontrol release {job}`)" in result.summary
    assert result.fingerprint == "queued:JobHeldUser"


def test_waiting_longer_than_max_pending_warns_whatever_the_reason(tmp_path: Path, store: StateStore,
                                                                  jobs: Jobs) -> None:
    name = unique("slow", tmp_path)
    jobs.submit("--begin=now+2hours", name=name)
    config = write_config(tmp_path, one_check(tmp_path, "slow", job_name=name, max_pending="6h"))
    now = tick(config, store)[1].now
    assert tick(config, store, now=now)[0]["slow"].status is Status.OK
    later = tick(config, store, now=now + timedelta(hours=7))[0]["slow"]
    assert later.status is Status.WARNING
    assert "over max_pending 6 h 00 min" in later.summary


def test_gone_job_is_critical_with_how_the_last_one_ended(tmp_path: Path, store: StateStore,
                                                        jobs: Jobs) -> None:
    name = unique("gone", tmp_path)
    job = jobs.submit(name=name, wrap="exit 3")
    wait_for(lambda: job_state(job) == "FAILED", what="job failed")
    wait_for(lambda: accounted(job), what="accounting has the end")
    config = write_config(tmp_path, one_check(tmp_path, "gone", job_name=name))
    result = tick(config, store)[0]["gone"]
    assert result.status is Status.CRITICAL
    assert result.summary.startswith(f"{name} (job {job}) failed on node")
    assert ": exit 3; ended " in result.summary
    assert result.context["last_state"] == "FAILED"


def test_unreachable_controller_is_unknown_never_job_gone(slurm_cluster: Path, tmp_path: Path,
                                                          store: StateStore) -> None:
    config = write_config(tmp_path, one_check(tmp_path, "train", job_name="anything"))
    env = {"SLURM_CONF": str(unreachable_conf(slurm_cluster, tmp_path))}
    result = tick(config, store, env=env)[0]["train"]
    assert result.status is Status.UNKNOWN
    assert "Unable to contact slurm controller" in result.summary
    assert "the job is not reported as stopped until Slurm answers cleanly" in result.summary


@pytest.fixture(scope="module")
def team() -> tuple[str, str, str]:
    """A Unix group `wdchk<pid>-six` with one listed member and one member by primary group."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create users")
    # Names of this process: the release matrix runs this test on three clusters at once, and
    # one run's teardown must not delete the users another run is submitting as.
    base = f"wdchk{os.getpid()}"
    group, listed, primary = f"{base}-six", f"{base}-a", f"{base}-b"
    sh("groupadd", group)
    sh("useradd", "-M", "-G", group, listed)
    sh("useradd", "-M", "-g", group, primary)
    yield group, listed, primary
    for user in (listed, primary):
        subprocess.run(["userdel", user], check=False, capture_output=True)
    subprocess.run(["groupdel", group], check=False, capture_output=True)


# root: creates users and submits jobs as them (sbatch --uid)
@pytest.mark.root
def test_group_matches_jobs_of_every_member(tmp_path: Path, store: StateStore, jobs: Jobs,
                                            team: tuple[str, str, str]) -> None:
    group, listed, primary = team
    name = unique("team", tmp_path)
    ids = {jobs.submit("--hold", f"--uid={user}", "--chdir=/tmp", name=name) for user in (listed, primary)}
    jobs.submit("--hold", name=name)  # root's: not in the group
    config = write_config(tmp_path, one_check(tmp_path, "team", job_name=name, users=f"@{group}"))
    result = tick(config, store)[0]["team"]
    queued = {m.label: m.value for m in result.metrics}["queued"]
    assert queued == 2
    assert {result.context["job"]} <= ids


def test_twenty_checks_share_one_squeue_call(tmp_path: Path, store: StateStore, jobs: Jobs) -> None:
    log = tmp_path / "calls.log"
    shim = tmp_path / "bin"
    shim.mkdir()
    real = subprocess.run(["which", "squeue"], capture_output=True, text=True, check=True).stdout.strip()
    (shim / "squeue").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real} "$@"\n')
    (shim / "squeue").chmod(stat.S_IRWXU)
    jobs.submit("--hold", name=unique("c0", tmp_path))
    body = "".join(one_check(tmp_path, f"c{i}", job_name=unique(f"c{i}", tmp_path)) for i in range(20))
    config = write_config(tmp_path, body)
    results = tick(config, store, env={"PATH": f"{shim}:{os.environ['PATH']}"})[0]
    calls = log.read_text().splitlines()
    assert len(calls) == 1
    assert "--name=" in calls[0] and f"--user={getpass.getuser()}" in calls[0]
    assert results["c0"].status is Status.WARNING
    assert sum(r.status is Status.CRITICAL for r in results.values()) == 19


def test_gone_job_is_resubmitted_until_the_crash_loop_limit(tmp_path: Path, store: StateStore,
                                                           jobs: Jobs) -> None:
    name = unique("resub", tmp_path)
    script = tmp_path / "train.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nexit 1\n")
    # fail_fast = "0s": this test is about the crash-loop limit, not about early failures.
    config = write_config(tmp_path, one_check(tmp_path, "train", job_name=name, resubmit="train.slurm",
                                              resubmit_limit=2, fail_fast="0s"))
    # A resubmit needs accounting's record of how a run ended: the first run fails on its own.
    first = jobs.submit(name=name, wrap="exit 1")
    wait_for(lambda: accounted(first), timeout=90, what="accounting has the first run's end")
    for attempt in (1, 2):
        result = tick(config, store)[0]["train"]
        assert result.status is Status.WARNING, result.summary
        ordinal = {1: "1st", 2: "2nd"}[attempt]
        assert f"Resubmitted as job {result.context['resubmitted']} ({ordinal} of at most 2" in result.summary
        jobs.ids.append(result.context["resubmitted"])
        wait_for(lambda: accounted(jobs.ids[-1]), timeout=90, what="resubmitted job failed and recorded")
    stopped = tick(config, store)[0]["train"]
    assert stopped.status is Status.CRITICAL
    assert "Not resubmitted: crash loop (2 resubmits in the last 6 h 00 min, limit 2)" in stopped.summary
    (tmp_path / "NO_RESUBMIT").touch()
    assert "kill switch" in tick(config, store)[0]["train"].summary
