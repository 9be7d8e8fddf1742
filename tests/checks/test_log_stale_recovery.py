"""A `log_stale` alert about a run that restarted in place shows the run's recovery record
as the `job` alerts do (the suspects, the last recovery): an in-place restart changes no job
state, and without these lines the reader of "training hung" would not know one happened.
Real cluster, real mailbox."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.checks.conftest import Jobs, tick, write_config
from tests.checks.test_job_endings_cluster import plain
from tests.checks.test_recovery_alerts import mail, recovery
from tests.helpers import job_state, wait_for
from tests.notifiers.fakes import SmtpServer
from trainguard.heartbeat import write_heartbeat
from watchdogs.alerts import build_sink
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm


def test_a_hang_alert_after_an_in_place_restart_shows_the_suspect_and_the_last_recovery(
        jobs: Jobs, tmp_path: Path) -> None:
    name, run = f"wdstale-rec-{os.getpid()}", tmp_path / "run"
    job = jobs.submit(name=name)
    wait_for(lambda: job_state(job) == "RUNNING", timeout=60, what="job running")
    # The template's in-place restart after node2 hung, then a hang of the restarted step.
    recovery("note", "--run-dir", str(run), "--job", job, "--cause", "hang", "--nodes", "node2",
             "--step", "300", "--detail", "rank 1, in all_reduce")
    recovery("plan", "--run-dir", str(run), "--allocation", "node[1-3]", "--need", "2", "--job", job)
    assert recovery("restart", "--run-dir", str(run), "--job", job, "--kind", "inplace", "--cause", "hang",
                    "--node", "node2", "--step", "250").returncode == 0
    (run / "heartbeat").mkdir()
    write_heartbeat(run / "heartbeat", 0, 420, "hung", now=time.time(), job_id=job, stalled_for=95.0)
    checks = (f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\nrun_dir = "{run}"\n'
              f'[[check]]\nname = "stale"\ntype = "log_stale"\njob = "train"\n'
              f'heartbeats = "{run / "heartbeat"}"\n')
    with SmtpServer() as smtp:
        cfg = write_config(tmp_path, checks + mail(smtp.port))
        store = StateStore(cfg.scheduler.state_dir)
        try:
            results, ctx = tick(cfg, store, only=("stale",))
            sink = build_sink(cfg, store)
            sink.handle([ItemOutcome("stale", "check", results["stale"], ctx.now, ctx.now)], ctx.now)
            sink.flush(ctx.now)
        finally:
            store.close()
    text, = [plain(m.message) for m in smtp.received]
    flat = " ".join(line.strip().removeprefix("| ") for line in text.splitlines())
    assert "CRITICAL: stale" in text and "training hung at step 420" in flat, text
    assert "last recovery: node2 stopped the run at step 300 (rank 1, in all_reduce); node2 excluded; " \
           "training resumed at " in flat, text
    assert "suspect nodes (excluded from the next start): node2: hang at step 300" in flat, text
