"""Issue 22's acceptance on the real cluster: "five quick failures in a row end the chain with
one page that lists them". A real template (train-requeue.slurm, srun, one spare node) runs
the real training, whose rank 0 dies by SIGKILL a few steps into every launch: three in-place
restarts, then a requeue (TRAINGUARD_INPLACE_MAX=3), then one more in-place restart, the
fifth restart in 30 min: the batch script ends the chain (exit 6, no requeue). The watchdog
(`watchdogs run --once`, its own environment, a real SMTP server) sends one page that lists
each restart: when, which kind, which cause, which node, from which step, and does not
resubmit.

The job runs with a non-default suspect policy (no exclusion by count: the partition has no
fourth node to replace one); the watchdog, whose environment has the defaults, must judge by
the job's policy and not call the run's nodes excluded."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.helpers import accounted, sh, wait_for
from tests.notifiers.fakes import SmtpServer
from tests.trainguard.support import REQUEUE_SCRIPT, Cluster

pytestmark = pytest.mark.slurm

# Rank 0 dies 10 steps into each launch; a checkpoint every 4 steps, so each restart resumes
# further on (a storm by count, not by lack of progress).
TRAIN = ("--steps", "400", "--step-sleep", "0.05", "--save-every", "4", "--kill-rank", "0",
         "--kill-after", "10")
ENV = {"TRAIN_LAUNCH": "srun", "TRAIN_NODES": "2", "MASTER_ADDR": "127.0.0.1",
       "TRAINGUARD_HEARTBEAT_EVERY": "1", "TRAINGUARD_SUSPECT_LIMIT": "0"}
HISTORY = re.compile(r"^\s*\|?\s*(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)  (\w+)\s+(\w+)\s+node (\S+)\s+"
                     r"from step (\S+) \(job (\d+)\)$")


def watchdog_config(folder: Path, name: str, run: Path, port: int) -> Path:
    script = folder / "resubmit.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nexit 0\n")
    config = folder / "watchdogs.toml"
    config.write_text(
        f'[scheduler]\nstate_dir = "state"\n[alerts]\nnotify = ["mail"]\n'
        f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {port}\n'
        f'sender = "w@example.org"\nto = "ops@example.org"\n'
        f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\nrun_dir = "{run}"\n'
        f'resubmit = "{script}"\nfail_fast = "0s"\n')
    return config


def plain(raw: bytes) -> str:
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    body = message.get_body(("plain",))
    assert body is not None, "every alert mail has a plain-text part"
    return f"Subject: {message['Subject']}\n\n{body.get_content()}"


@pytest.mark.timeout(240)
def test_five_quick_rank_deaths_end_the_chain_with_one_page_listing_each_restart(
        cluster: Cluster, tmp_path: Path) -> None:
    run, out = tmp_path / "run", tmp_path / "out.log"
    name = f"storm-{tmp_path.name[-10:]}"
    job = cluster.sbatch(REQUEUE_SCRIPT, *TRAIN, env={"RUN_DIR": str(run), **ENV},
                         sbatch_args=("-p", "spare", "-N", "3", "--ntasks-per-node=1", "-J", name,
                                      "-o", str(out)))
    # Three in-place restarts, then the template requeues; the requeued run waits for its
    # BeginTime: the user lets it start now.
    cluster.release_when_requeued(job, 1, timeout=120)
    cluster.wait_state(job, ("FAILED", "COMPLETED", "CANCELLED"), timeout=120)
    log = out.read_text()
    # Accounting records the last run's end a moment after squeue (on 24.11 it still showed 0:0).
    exit_code = lambda: sh("sacct", "-n", "-X", "-j", job, "-o", "ExitCode").split()  # noqa: E731 - a probe
    wait_for(lambda: exit_code() == ["6:0"], 60, 0.5,
             f"accounting has exit 6 for job {job}; log: {log[-2000:]}")
    assert "restart storm, ending the chain (exit 6, not requeueing)" in log, log[-3000:]

    # A rank killed outright: the first in-place restart's summary names its node and "died".
    first_set = re.search(r"training step on (\S+) \(in-place restart 0\)", log)
    assert first_set, log[-3000:]
    rank0 = sh("scontrol", "show", "hostnames", first_set.group(1)).split()[0]
    summaries = re.findall(r"train-requeue\[\d+\]: summary=(.*)$", log, re.MULTILINE)
    assert len(summaries) == 5, log[-4000:]
    assert summaries[0].startswith(f"a rank on {rank0} died at step "), summaries[0]
    assert "training resumed at " in summaries[0]
    assert "job " + job + " requeued at " in summaries[3], summaries[3]

    wait_for(lambda: accounted(job), 60, 0.5, f"accounting has job {job}'s end")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINGUARD_")}
    with SmtpServer() as smtp:
        config = watchdog_config(tmp_path, name, run, smtp.port)
        tick = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(config), "run", "--once"],
                              capture_output=True, text=True, timeout=120, env=env)
        wait_for(lambda: smtp.received, 30, 0.2, "the page delivered")
    assert len(smtp.received) == 1, [plain(m.data) for m in smtp.received]
    eml = tmp_path / "page.eml"
    eml.write_bytes(smtp.received[0].data)
    text = plain(eml.read_bytes())
    context = (text, tick.stdout[-2000:], tick.stderr[-2000:])
    assert sh("squeue", "-h", "--name", name, "-o", "%i").split() == [], context   # nothing resubmitted
    assert "CRITICAL" in text.split("\n", 1)[0], context
    assert "Not resubmitted: the run ended its chain on purpose after a restart storm " \
           "(5 restarts in 30 min)" in text, context
    assert "restart storm: 5 restarts in 30 min; the chain was ended on purpose (no requeue, no " \
           "resubmission). The restarts:" in " ".join(text.split()), context
    history = [m.groups() for line in text.splitlines() if (m := HISTORY.match(line))]
    assert len(history) == 5, context
    assert [kind for _, kind, _, _, _, _ in history] == ["inplace"] * 3 + ["requeue", "inplace"]
    assert all(cause == "rank_died" and rank0 in node.split(",") and j == job
               for _, _, cause, node, _, j in history), history
    steps = [int(step) for _, _, _, _, step, _ in history]
    assert steps == sorted(steps) and len(set(steps)) == 5, history   # each resumed further on
    assert [when for when, *_ in history] == sorted(when for when, *_ in history)
    # Judged by the job's policy (no exclusion by count), not the watchdog's defaults.
    assert "excluded from the next start" not in text and "recovery policy:" not in text, context


@pytest.mark.timeout(180)
def test_a_peer_rank_killed_outright_is_a_dead_rank_on_its_own_node(cluster: Cluster, tmp_path: Path) -> None:
    run, out = tmp_path / "run", tmp_path / "out.log"
    job = cluster.sbatch(REQUEUE_SCRIPT, *TRAIN[:-4], "--kill-rank", "1", "--kill-after", "10",
                         env={"RUN_DIR": str(run), **ENV, "TRAINGUARD_STORM_RESTARTS": "2"},
                         sbatch_args=("-p", "spare", "-N", "3", "--ntasks-per-node=1", "-o", str(out)))
    cluster.wait_state(job, ("FAILED", "COMPLETED", "CANCELLED"), timeout=150)
    log = out.read_text()
    first_set = re.search(r"training step on (\S+) \(in-place restart 0\)", log)
    assert first_set, log[-3000:]
    rank0, rank1 = sh("scontrol", "show", "hostnames", first_set.group(1)).split()
    assert "restarting in place on" in log, log[-3000:]
    summaries = re.findall(r"train-requeue\[\d+\]: summary=(.*)$", log, re.MULTILINE)
    assert summaries and summaries[0].startswith(f"a rank on {rank1} died at step "), summaries
    assert rank0 not in summaries[0].split(";")[0], summaries[0]


@pytest.mark.timeout(240)
def test_a_peer_killed_once_restarts_in_place_and_ends_with_the_uninterrupted_digest(
        cluster: Cluster, tmp_path: Path) -> None:
    # The peer that raised when its collective broke is mid-step: it must not save (a save there
    # would carry the step's data and RNG draws already made, and the resumed run would differ).
    train = ("--steps", "60", "--step-sleep", "0.05", "--save-every", "4")
    env = {k: v for k, v in ENV.items() if k != "TRAINGUARD_SUSPECT_LIMIT"}
    ref_out, out = tmp_path / "ref.log", tmp_path / "out.log"
    ref = cluster.sbatch(REQUEUE_SCRIPT, *train, env={**env, "RUN_DIR": str(tmp_path / "ref")},
                         sbatch_args=("-p", "cpu", "-n", "2", "-o", str(ref_out)))
    job = cluster.sbatch(REQUEUE_SCRIPT, *train, "--kill-rank", "1", "--kill-after", "10", "--kill-once",
                         env={**env, "RUN_DIR": str(tmp_path / "run")},
                         sbatch_args=("-p", "spare", "-N", "3", "--ntasks-per-node=1", "-o", str(out)))
    cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=200)
    log = out.read_text()
    assert cluster.state(job) == "COMPLETED" and cluster.field(job, "Restarts") == "0", log[-3000:]
    assert "(in-place restart 1)" in log and "(in-place restart 2)" not in log, log[-3000:]
    cluster.wait_state(ref, ("COMPLETED",), timeout=120)
    digest = re.compile(r"^digest ([0-9a-f]{64})$", re.MULTILINE)
    expected = set(digest.findall(ref_out.read_text()))
    assert len(expected) == 1 and set(digest.findall(log)) == expected, (expected, log[-3000:])
