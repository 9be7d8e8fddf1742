"""`log_stale`: fresh vs stale logs, a progress counter advancing vs stuck, trainguard
heartbeats, a queued job's log not judged, and a hung mount answered in bounded time."""
from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.checks.conftest import Jobs, tick, unreachable_conf, write_config
from tests.checks.hung_mount import fuse_available, hung_mount
from tests.helpers import job_state, wait_for
from trainguard.heartbeat import write_heartbeat
from watchdogs.result import Status
from watchdogs.state.store import StateStore


def log_check(**opts: str) -> str:
    keys = "\n".join(f"{k} = {json.dumps(v)}" for k, v in opts.items())
    return f'[[check]]\nname = "hung"\ntype = "log_stale"\n{keys}\n'


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_fresh_log_is_ok_and_stale_log_is_critical(tmp_path: Path, store: StateStore) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    config = write_config(tmp_path, log_check(path="train.log", max_age="10m"))
    assert tick(config, store)[0]["hung"].status is Status.OK
    age(log, 3600)
    stale = tick(config, store)[0]["hung"]
    assert stale.status is Status.CRITICAL
    assert re.search(r"train\.log last written 1 h 00 min ago \(\d{4}-\d\d-\d\d \d\d:\d\d \w+\) "
                     r"\(max_age 10 min 00 s\)", stale.summary), stale.summary


def test_glob_watches_the_newest_match(tmp_path: Path, store: StateStore) -> None:
    old, new = tmp_path / "slurm-1.out", tmp_path / "slurm-2.out"
    old.write_text("x")
    new.write_text("y")
    age(old, 7200)
    config = write_config(tmp_path, log_check(path="slurm-*.out", max_age="10m"))
    result = tick(config, store)[0]["hung"]
    assert result.status is Status.OK and "slurm-2.out" in result.summary


def test_progress_counter_must_advance_within_max_age(tmp_path: Path, store: StateStore) -> None:
    log = tmp_path / "train.log"
    log.write_text("iter 100 loss 2.0\niter 200 loss 1.9\n")
    config = write_config(tmp_path, log_check(path="train.log", max_age="10m", progress=r"iter (\d+)"))
    start = datetime.now().astimezone()
    assert tick(config, store, now=start)[0]["hung"].summary.endswith("progress 200")
    with log.open("a") as fh:
        fh.write("iter 300 loss 1.8\n")
    moved = tick(config, store, now=start + timedelta(minutes=8))[0]["hung"]
    assert moved.status is Status.OK and "progress 300" in moved.summary
    # The file keeps being written (warnings, say) but the counter stays at 300.
    for minutes in (12, 19):
        with log.open("a") as fh:
            fh.write("warning: slow collective\n")
        result = tick(config, store, now=start + timedelta(minutes=minutes))[0]["hung"]
    assert result.status is Status.CRITICAL
    since = (start + timedelta(minutes=8)).strftime("%Y-%m-%d %H:%M")
    assert f"progress stuck at 300 for 11 min 00 s (since {since} " in result.summary, result.summary
    assert "; max_age 10 min 00 s)" in result.summary


def test_heartbeats_name_the_rank_left_behind_and_spare_busy_ranks(tmp_path: Path,
                                                                  store: StateStore) -> None:
    beats = tmp_path / "hb"
    beats.mkdir()
    now = time.time()
    write_heartbeat(beats, 0, 1450, "train", now=now - 5)
    write_heartbeat(beats, 1, 1450, "train", now=now - 8)
    write_heartbeat(beats, 2, 1200, "saving", now=now - 900)
    config = write_config(tmp_path, log_check(heartbeats="hb", max_age="5m"))
    ok = tick(config, store)[0]["hung"]
    assert ok.status is Status.OK and "3 ranks alive at step 1450" in ok.summary
    assert any("rank 2 saving at step 1200" in d for d in ok.details)
    write_heartbeat(beats, 2, 1200, "train", now=now - 900)
    stuck = tick(config, store, now=datetime.fromtimestamp(now).astimezone())[0]["hung"]
    assert stuck.status is Status.CRITICAL
    beat_at = datetime.fromtimestamp(now - 900).astimezone().strftime("%Y-%m-%d %H:%M %Z")
    assert f"rank 2 stuck at step 1200 (last beat 15 min 00 s ago, {beat_at})" in stuck.summary, \
        stuck.summary
    assert ") while ranks 0-1 reached 1450" in stuck.summary


@pytest.mark.slurm
def test_queued_job_log_is_not_judged(tmp_path: Path, store: StateStore, jobs: Jobs) -> None:
    name = f"wd-ls-{tmp_path.name[-8:]}"
    jobs.submit("--hold", name=name)
    log = tmp_path / "train.log"
    log.write_text("x")
    age(log, 7200)
    config = write_config(tmp_path, f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n'
                          + log_check(path="train.log", max_age="10m", job="train"))
    result = tick(config, store, only=("hung",))[0]["hung"]
    assert result.status is Status.OK
    assert "not judged while job check 'train' is queued" in result.summary


@pytest.mark.slurm
def test_running_job_log_is_judged_from_the_job_start(tmp_path: Path, store: StateStore,
                                                      jobs: Jobs) -> None:
    name = f"wd-ls-{tmp_path.name[-8:]}"
    job = jobs.submit(name=name)
    wait_for(lambda: job_state(job) == "RUNNING", what="job running")
    log = tmp_path / "train.log"
    log.write_text("x")
    age(log, 7200)  # left by the previous run: the new one has just started
    config = write_config(tmp_path, f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n'
                          + log_check(path="train.log", max_age="10m", job="train"))
    results, ctx = tick(config, store)
    assert results["hung"].status is Status.OK
    later = tick(config, store, now=ctx.now + timedelta(minutes=11))[0]["hung"]
    assert later.status is Status.CRITICAL


@pytest.mark.timeout(60)
def test_hung_mount_is_unknown_not_responding_within_the_probe_timeout(tmp_path: Path,
                                                                     store: StateStore) -> None:
    reason = fuse_available()
    if reason:
        pytest.skip(reason)
    with hung_mount(tmp_path / "mnt"):
        config = write_config(tmp_path, log_check(path="mnt/train.log", probe_timeout="2s"))
        started = time.monotonic()
        result = tick(config, store)[0]["hung"]
        assert time.monotonic() - started < 10
    assert result.status is Status.UNKNOWN
    assert "filesystem not responding (no answer within 2 s)" in result.summary


@pytest.mark.slurm
def test_stale_log_with_slurm_unreachable_is_unknown_and_fresh_log_still_ok(
        slurm_cluster: Path, tmp_path: Path, store: StateStore) -> None:
    log = tmp_path / "train.log"
    log.write_text("x")
    config = write_config(tmp_path, '[[check]]\nname = "train"\ntype = "job"\njob_name = "t"\n'
                          + log_check(path="train.log", max_age="10m", job="train"))
    env = {"SLURM_CONF": str(unreachable_conf(slurm_cluster, tmp_path))}
    assert tick(config, store, env=env)[0]["hung"].status is Status.OK
    age(log, 3600)
    result = tick(config, store, env=env)[0]["hung"]
    assert result.status is Status.UNKNOWN
    assert "cannot tell whether the job runs" in result.summary
