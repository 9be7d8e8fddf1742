"""When Slurm refuses the exclusion after a requeue (here: a node name it does not know, as a
node retired from slurm.conf would be), `python -m trainguard.recovery.requeue` notes it in the run's
record, and the watchdog tells it: "the requeued run may land on NODE again: Slurm refused
the exclusion (reason)", in the mail, not only in a batch log nobody reads at 3 am."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.checks.conftest import tick, write_config
from tests.checks.test_job_endings_cluster import notice_lines, plain
from tests.checks.test_recovery_alerts import mail
from tests.helpers import wait_for
from tests.notifiers.fakes import SmtpServer
from tests.trainguard.support import PYTHON, Cluster
from trainguard.recovery import journal
from watchdogs.alerts import build_sink
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm

PROBE = """#!/bin/bash
#SBATCH --requeue
#SBATCH --open-mode=append
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
  trap '' TERM
  "$PROBE_PYTHON" -m trainguard.recovery.requeue --job "$SLURM_JOB_ID" --exclude node9
  echo "after the requeue: exit $?"
  sleep 60
fi
"""


@pytest.mark.timeout(120)
def test_a_refused_exclusion_after_a_requeue_is_recorded_and_told_by_the_watchdog(
        cluster: Cluster, tmp_path: Path) -> None:
    script, out, run = tmp_path / "probe.sh", tmp_path / "probe.log", tmp_path / "run"
    name = f"wdrefused-{os.getpid()}"
    script.write_text(PROBE)
    job = cluster.sbatch(script, sbatch_args=("-p", "spare", "-N", "1", "-J", name, "-o", str(out)),
                         env={"PROBE_PYTHON": PYTHON, "TRAINGUARD_RUN_DIR": str(run)})
    # Requeued and pending (held for its BeginTime): the refusal is in the record by then.
    wait_for(lambda: cluster.field(job, "Restarts") == "1" and cluster.state(job) == "PENDING", 60, 0.25,
             f"job {job} requeued")
    wait_for(lambda: journal.read(run).of("exclusion_refused"), 30, 0.25, "the refusal in the record")
    assert "why=requeued WITHOUT excluding node9: " in out.read_text(), out.read_text()
    with SmtpServer() as smtp:
        cfg = write_config(tmp_path, f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n'
                                     f'run_dir = "{run}"\n' + mail(smtp.port))
        store = StateStore(cfg.scheduler.state_dir)
        try:
            sink = build_sink(cfg, store)
            for _ in range(2):     # told once
                results, ctx = tick(cfg, store)
                sink.handle([ItemOutcome("train", "check", results["train"], ctx.now, ctx.now)], ctx.now)
                sink.flush(ctx.now)
        finally:
            store.close()
    told = [n for m in smtp.received for n in notice_lines(plain(m.message))]
    assert len(told) == 1, told
    assert told[0].startswith(f"{name} (job {job}): the requeued run may land on node9 again: Slurm "
                              "refused the exclusion (") and "Invalid node name" in told[0], told
    assert cluster.field(job, "ExcNodeList") == "(null)"
