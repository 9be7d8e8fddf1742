"""Recovery on the real cluster (issue 22): a frozen rank with a spare node restarts the
training inside the same job, on the other nodes, with no requeue, and it ends with an
uninterrupted run's digest; without a spare the job requeues with the frozen rank's node in
ExcNodeList and the next run avoids it; a requeue's exclusion holds on every release.
The in-place restart is also watched (issue 36): the hang alert mail says the template
decides, and the RESOLVED mail carries the recovery's summary line."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checks.test_job_endings_cluster import plain
from tests.helpers import wait_for
from tests.notifiers.fakes import SmtpServer
from tests.trainguard.support import (
    PYTHON,
    REQUEUE_SCRIPT,
    TORCHRUN_SCRIPT,
    Cluster,
    read_steps,
    wait_for_step,
)
from tests.trainguard.test_hang_slurm import HANG_ENV, TRAIN, heartbeat
from tests.trainguard.test_slurm_torchrun import NODES, PER_NODE, STEPS, four_rank_reference  # noqa: F401 - a fixture
from trainguard.hangs.record import EVENTS_FILE

pytestmark = pytest.mark.slurm
DIGEST = re.compile(r"^digest ([0-9a-f]{64})$", re.MULTILINE)


def hostnames(hostlist: str) -> list[str]:
    return subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True,
                          check=True).stdout.split()


def reference(cluster: Cluster, tmp_path: Path, env: dict[str, str],
              train: tuple[str, ...] = TRAIN) -> tuple[str, Path]:
    """The uninterrupted run, two ranks on the third node, at the same time."""
    out = tmp_path / "ref.log"
    job = cluster.sbatch(REQUEUE_SCRIPT, *train, sbatch_args=("-p", "cpu", "-n", "2", "-o", str(out)),
                         env={**env, "RUN_DIR": str(tmp_path / "ref")})
    return job, out


def digests(log: str) -> set[str]:
    return set(DIGEST.findall(log))


def batch_script_pid(cluster: Cluster, job: str) -> int:
    """The job's batch shell, found in /proc by the script's full path in this cluster's spool
    (other dev clusters on this host number their jobs from 1 too)."""
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                            check=True).stdout
    spool = re.search(r"^SlurmdSpoolDir\s*=\s*(\S+)", config, re.MULTILINE)
    assert spool, config
    script = f"{spool.group(1).replace('%n', cluster.field(job, 'BatchHost'))}/job{int(job):05d}/slurm_script"

    def find() -> int | None:
        for proc in Path("/proc").iterdir():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:    # not a process, gone, or not ours
                continue
            if proc.name.isdigit() and script.encode() in argv:
                return int(proc.name)
        return None
    found = wait_for(find, 30, 0.2, f"job {job}'s batch script")
    assert found is not None
    return found


def watchdog_mail_config(folder: Path, heartbeats: Path, port: int) -> Path:
    """A log_stale check on the heartbeats folder, with NO run_dir key (the recovery folder
    is found beside it), alerting by email."""
    config = folder / "watchdogs.toml"
    config.write_text(f'[scheduler]\nstate_dir = "state"\n'
                      f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {port}\n'
                      f'sender = "watchdogs@example.org"\nto = ["oncall@example.org"]\nhtml = false\n'
                      f'[[check]]\nname = "hung"\ntype = "log_stale"\nheartbeats = "{heartbeats}"\n'
                      f'max_age = "10m"\n')
    return config


def watchdog_tick(config: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(config), "run", "--once"],
                          capture_output=True, text=True, timeout=60)
    return f"rc {done.returncode}\n{done.stdout}\n{done.stderr}"


@pytest.mark.timeout(300)
def test_with_a_spare_a_frozen_rank_restarts_in_the_same_job_on_the_other_nodes_identical(
        cluster: Cluster, tmp_path: Path) -> None:
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    env = {"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1", "TRAIN_NODES": "2",
           **HANG_ENV}
    ref, ref_out = reference(cluster, tmp_path, env)
    job = cluster.sbatch(REQUEUE_SCRIPT, *TRAIN, "--step-log", str(steps), env=env,
                         sbatch_args=("-p", "spare", "-N", "3", "--ntasks-per-node=1", "-o", str(out)))
    wait_for_step(steps, 60)
    frozen = heartbeat(run, 1, job)
    first_set = re.search(r"training step on (\S+) \(in-place restart 0\)", out.read_text())
    assert first_set, out.read_text()[-2000:]
    # The batch script is held (SIGSTOP) so the watchdog's tick falls between the hang and the
    # template's decision, which otherwise comes within seconds; SIGCONT lets it decide.
    batch = batch_script_pid(cluster, job)
    os.kill(batch, signal.SIGSTOP)
    try:
        os.kill(frozen.pid, signal.SIGSTOP)         # rank 1 freezes; rank 0 reports the hang
        with SmtpServer() as smtp:
            config = watchdog_mail_config(tmp_path, run / "heartbeat", smtp.port)
            events = run / "heartbeat" / EVENTS_FILE
            wait_for(lambda: events.exists() and "exiting 140" in events.read_text(), 60, 0.3,
                     "rank 0's hang event")
            ticks = [watchdog_tick(config)]
            wait_for(lambda: len(smtp.received) >= 1, 30, 0.2, f"the hang alert mail: {ticks}")
            os.kill(batch, signal.SIGCONT)
            cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=200)
            ticks.append(watchdog_tick(config))
            wait_for(lambda: len(smtp.received) >= 2, 30, 0.2, f"the RESOLVED mail: {ticks}")
    finally:
        with contextlib.suppress(ProcessLookupError):    # the job ended: nothing left to let go
            os.kill(batch, signal.SIGCONT)
    alert, done = (" ".join(plain(m.message).split()) for m in smtp.received[:2])
    assert "CRITICAL" in smtp.received[0].message["Subject"], (smtp.received[0].message["Subject"], alert)
    assert "the template decides: restart in place (1 spare left) or requeue" in alert, alert
    assert "(requeue)" not in alert, alert     # no promise of a requeue
    assert "RESOLVED" in smtp.received[1].message["Subject"], smtp.received[1].message["Subject"]
    summary = (run / "recovery" / "summary.txt").read_text().strip()
    assert re.search(rf"{frozen.host} excluded; training resumed at \S+ on \S+ from step \d+, .* after the "
                     r"fault; 0 spares left", summary), summary
    assert " ".join(summary.split()) in done, done
    log = out.read_text()
    restarted = re.search(r"restarting in place on (\S+)", log)
    assert restarted, log[-4000:]
    nodes = hostnames(restarted.group(1))
    assert frozen.host not in nodes and len(nodes) == 2, (frozen.host, nodes)
    assert "training step on" in log and "(in-place restart 1)" in log
    assert re.search(rf"summary=.*{frozen.host}", log), log[-3000:]
    # The same job, never requeued: Slurm's restart count did not move.
    assert cluster.field(job, "Restarts") == "0" and cluster.state(job) == "COMPLETED", log[-3000:]
    assert "requeueing" not in log.replace("not requeueing", "")
    # trainguard counts the in-place restart itself, in the resumed step's log.
    assert re.search(r"in-place restart 1 of job \d+", log), log[-3000:]
    cluster.wait_state(ref, ("COMPLETED",), timeout=60)
    expected = digests(ref_out.read_text())
    assert len(expected) == 1 and digests(log) == expected
    assert read_steps(steps)[-1] == int(TRAIN[1]) - 1


@pytest.mark.timeout(300)
def test_without_a_spare_the_job_requeues_excluding_the_frozen_ranks_node_and_avoids_it(
        cluster: Cluster, tmp_path: Path) -> None:
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    env = {"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1", **HANG_ENV}
    # Two nodes of the three-node partition: excluding one still leaves enough to run on.
    job = cluster.sbatch(REQUEUE_SCRIPT, *TRAIN, "--step-log", str(steps), env=env,
                         sbatch_args=("-p", "spare", "-N", "2", "--ntasks-per-node=1", "-o", str(out)))
    wait_for_step(steps, 60)
    frozen = heartbeat(run, 1, job)
    os.kill(frozen.pid, signal.SIGSTOP)
    wait_for(lambda: cluster.field(job, "Restarts") == "1", 120, 0.25, f"job {job} requeued")
    assert frozen.host in hostnames(cluster.field(job, "ExcNodeList")), cluster.field(job, "ExcNodeList")
    cluster.release_when_requeued(job, 1)
    cluster.wait_state(job, ("COMPLETED", "FAILED"), timeout=150)
    log = out.read_text()
    assert re.search(rf"requeueing, excluding {frozen.host}", log), log[-3000:]
    assert frozen.host not in hostnames(cluster.field(job, "NodeList")), log[-3000:]
    assert cluster.state(job) == "COMPLETED" and len(digests(log)) == 1


PROBE = """#!/bin/bash
#SBATCH --requeue
#SBATCH --open-mode=append
echo "run ${SLURM_RESTART_COUNT:-0} on $SLURMD_NODENAME"
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
  trap '' TERM
  "$PROBE_PYTHON" -m trainguard.recovery.requeue --job "$SLURM_JOB_ID" --exclude "$SLURMD_NODENAME"
  echo "after the requeue: exit $?"
fi
"""


@pytest.mark.timeout(120)
def test_a_requeue_sets_the_exclusion_once_pending_and_the_next_run_avoids_the_node(
        cluster: Cluster, tmp_path: Path) -> None:
    script, out = tmp_path / "probe.sh", tmp_path / "probe.log"
    script.write_text(PROBE)
    job = cluster.sbatch(script, sbatch_args=("-p", "spare", "-N", "1", "-o", str(out)),
                         env={"PROBE_PYTHON": PYTHON})
    cluster.release_when_requeued(job, 1)
    cluster.wait_state(job, ("COMPLETED",), timeout=60)
    log = out.read_text()
    runs = re.findall(r"^run (\d) on (\S+)$", log, re.MULTILINE)
    assert [r for r, _ in runs] == ["0", "1"], log
    first, second = runs[0][1], runs[1][1]
    assert f"excluded={first}" in log and f"why=requeued, excluding {first}" in log, log
    assert second != first and hostnames(cluster.field(job, "ExcNodeList")) == [first]


@pytest.mark.timeout(400)
def test_torchrun_with_a_spare_restarts_in_place_after_a_frozen_worker_identical(
        cluster: Cluster, tmp_path: Path,
        four_rank_reference: subprocess.Popen[str]) -> None:  # noqa: F811 - the fixture imported above, by name
    run, steps, out = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log"
    job = cluster.sbatch(TORCHRUN_SCRIPT, "--steps", str(STEPS), "--step-sleep", "0.03", "--save-every", "25",
                         "--step-log", str(steps),
                         sbatch_args=("-p", "spare", "-N", "3", "-c", str(PER_NODE), "-o", str(out)),
                         env={"RUN_DIR": str(run), "NPROC_PER_NODE": str(PER_NODE), "TRAIN_NODES": "2",
                              **HANG_ENV})
    wait_for_step(steps, 60, timeout=120)
    frozen = heartbeat(run, 2, job)              # a worker of the second node
    os.kill(frozen.pid, signal.SIGSTOP)
    cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=300)
    log = out.read_text()
    restarted = re.search(r"restarting in place on (\S+)", log)
    assert restarted, log[-4000:]
    assert frozen.host not in hostnames(restarted.group(1)), (frozen.host, restarted.group(1))
    assert cluster.field(job, "Restarts") == "0" and cluster.state(job) == "COMPLETED", log[-3000:]
    assert len(re.findall(r"in-place restart 1 of job \d+", log)) == NODES * PER_NODE, log[-3000:]
    reference, err = four_rank_reference.communicate(timeout=120)
    assert four_rank_reference.returncode == 0, err[-3000:]
    assert len(digests(reference)) == 1 and digests(log) == digests(reference)


@pytest.mark.timeout(180)
def test_a_start_among_suspects_the_partition_cannot_spare_trains_there_instead_of_requeueing(
        cluster: Cluster, tmp_path: Path) -> None:
    # Two of the partition's three nodes are suspects (a hang each, excluded at once), and the
    # job holds all three: a requeue excluding them could never start, and one without the
    # exclusion would get the same nodes. The template trains on them, the healthy one first.
    run, out = tmp_path / "run", tmp_path / "out.log"
    for node in ("node1", "node2"):
        subprocess.run([PYTHON, "-m", "trainguard.recovery", "note", "--run-dir", str(run), "--job", "1",
                        "--cause", "hang", "--nodes", node, "--step", "5"], check=True, capture_output=True)
    env = {"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1", "TRAIN_NODES": "2",
           **HANG_ENV}
    job = cluster.sbatch(REQUEUE_SCRIPT, "--steps", "20", env=env,
                         sbatch_args=("-p", "spare", "-N", "3", "--ntasks-per-node=1", "-o", str(out)))
    cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=150)
    log = out.read_text()
    assert cluster.state(job) == "COMPLETED" and cluster.field(job, "Restarts") == "0", log[-3000:]
    assert "training on node3,node1 anyway: a requeue could only get the same nodes" in log, log[-3000:]
    assert "training step on node3,node1 (in-place restart 0)" in log, log[-3000:]
    assert "not excluding node1,node2" in log, log[-3000:]


SIDECAR_JOB = """#!/bin/bash
# A data server started as a step of its own before the training, another one after it, and the
# training step, whose rank 0 wrote its exit code while a frozen peer holds the step (a lost
# scancel): the templates' reaper must end the training's step only.
srun --overlap -n1 -N1 --job-name=data-server sleep 600 &
until squeue -h -s -j "$SLURM_JOB_ID" -o %i | grep -q "^$SLURM_JOB_ID\\.0$"; do sleep 0.2; done
srun --overlap -n1 -N1 --job-name=train {python} -c '
import time
from pathlib import Path
from trainguard.stopping.exits import write_exit_file
write_exit_file(Path("{exit_file}"), 140, "hung at step 12")
time.sleep(600)' &
child=$!
until [ -s "{exit_file}" ]; do sleep 0.2; done
srun --overlap -n1 -N1 --job-name=monitor sleep 600 &
until squeue -h -s -j "$SLURM_JOB_ID" -o %i | grep -q "^$SLURM_JOB_ID\\.2$"; do sleep 0.2; done
{python} -m trainguard.recovery.inplace reap --job "$SLURM_JOB_ID" --pid "$child" --exit-file "{exit_file}" \\
  --grace 1
echo reaped > "{reaped}"
wait
"""


@pytest.mark.timeout(120)
def test_reap_ends_the_trainings_step_and_leaves_the_jobs_sidecar_steps_running(
        cluster: Cluster, tmp_path: Path) -> None:
    exit_file, reaped, out = tmp_path / "exit-code", tmp_path / "reaped", tmp_path / "out.log"
    script = tmp_path / "sidecar.sh"
    script.write_text(SIDECAR_JOB.format(python=PYTHON, exit_file=exit_file, reaped=reaped))
    job = cluster.sbatch(script, sbatch_args=("-p", "cpu", "-N", "1", "-n", "3", "-o", str(out)))
    wait_for(reaped.exists, 90, what=f"the reaper of job {job} to return ({out})")
    steps = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"], capture_output=True, text=True,
                           check=True).stdout
    running = dict(line.split() for line in steps.splitlines())
    assert running.get(f"{job}.0") == "data-server" and running.get(f"{job}.2") == "monitor", \
        (steps, out.read_text()[-2000:])
    assert f"{job}.1" not in running, steps
    assert f"step={job}.1" in exit_file.read_text()
    assert f"step {job}.1 still runs: ending it" in out.read_text(), out.read_text()[-2000:]
