"""The preemption test of docs/trainguard.md, typed exactly as written there, against every
shipped template and launch mode: each training saves, exits 140, is requeued and resumes
from its checkpoint, and each template's log names the command. Typed without --batch, the
signal reaches the template's signal post (a job step), which hands it to the batch script
and ends COMPLETED with each run. The four jobs run side by side on one cluster."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import sh, wait_for
from tests.trainguard.support import (
    ARRAY_SCRIPT,
    REPO,
    REQUEUE_SCRIPT,
    TORCHRUN_SCRIPT,
    Cluster,
    read_steps,
)

pytestmark = pytest.mark.slurm
DOCS = REPO / "docs" / "trainguard.md"


def documented_preemption_test() -> list[str]:
    """The command of the docs' "Testing preemption safety" section, as argv with JOB left in."""
    section = DOCS.read_text().split("## Testing preemption safety", 1)[1]
    block = re.search(r"```bash\n(.+?)\n```", section, re.DOTALL)
    assert block, "docs/trainguard.md: no command under 'Testing preemption safety'"
    argv = shlex.split(block.group(1))
    assert argv[0] == "scancel" and argv[-1] == "JOB", argv
    return argv


@dataclass(frozen=True)
class Launch:
    name: str
    job: str
    target: str          # what the docs' JOB becomes (an array task for the array template)
    out: Path
    steps: Path


def submit_all(cluster: Cluster, tmp_path: Path) -> list[Launch]:
    train = ("--steps", "400", "--step-sleep", "0.03")
    launches = []
    for name, script, sbatch_args, env in (
            ("direct", REQUEUE_SCRIPT, (), {}),
            ("srun", REQUEUE_SCRIPT, ("-n", "2"), {"TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1"}),
            ("torchrun", TORCHRUN_SCRIPT, ("-c", "2"), {"NPROC_PER_NODE": "2"}),
            ("array", ARRAY_SCRIPT, ("--array=0",), {})):
        out, steps = tmp_path / f"{name}.log", tmp_path / f"{name}.steps"
        job = cluster.sbatch(script, *train, "--step-log", str(steps),
                             sbatch_args=("-o", str(out), *sbatch_args),
                             env={"RUN_DIR": str(tmp_path / f"run-{name}"), **env})
        launches.append(Launch(name, job, f"{job}_0" if name == "array" else job, out, steps))
    return launches


def accounted_steps(job: str) -> list[str]:
    return sh("sacct", "-n", "-P", "-D", "-j", job, "-o", "JobID,JobName,State").split()


def posts_ended(job: str) -> bool:
    """Accounting has the end of the job's run and of every signal post (none RUNNING)."""
    rows = accounted_steps(job)
    posts = [r for r in rows if "|signal-post|" in r]
    return len(posts) >= 2 and not any(r.endswith("|RUNNING") for r in rows)


def trained(steps: Path, at_least: int) -> bool:
    done = read_steps(steps) if steps.exists() else []
    return bool(done) and done[-1] >= at_least


@pytest.mark.timeout(360)
def test_the_documented_preemption_test_requeues_and_resumes_every_template(
        cluster: Cluster, tmp_path: Path) -> None:
    argv = documented_preemption_test()
    launches = submit_all(cluster, tmp_path)
    # Each job is signalled once it trains (step 20), in whichever order they get there: one
    # waited for in turn may have finished its 400 steps while a slower one started up.
    waiting = list(launches)
    def signal_those_training() -> bool:
        for launch in [w for w in waiting if trained(w.steps, 20)]:
            # scancel 22.05 may exit 229 for an array task it did signal (see test_slurm_switches.py).
            sh(*[launch.target if a == "JOB" else a for a in argv], check=False)
            waiting.remove(launch)
        return not waiting
    wait_for(signal_those_training, 120, 0.1, "every job at step 20")
    for launch in launches:
        cluster.release_when_requeued(launch.job, 1, 180)  # four jobs at once, on a loaded CI machine
    for launch in launches:
        cluster.wait_state(launch.job, ("COMPLETED",), timeout=120)
        log = launch.out.read_text()
        assert f"preemption test: {' '.join(argv[:-1])} {launch.job}" in log, (launch.name, log[-3000:])
        if "--batch" not in argv:  # the signal post took it and handed it to the batch script
            assert "got SIGUSR1 as a job step (scancel without --batch): handing it to the batch script" \
                in log, (launch.name, log[-3000:])
        assert "got SIGUSR1: forwarding it to" in log, (launch.name, log[-3000:])
        assert "signal-post:" not in log, (launch.name, log[-3000:])  # the post's shell said nothing wrong
        # The post ends before its run does, never killed with the job ("CANCELLED", "Killed").
        # Accounting records a run's end a moment after the controller (24.11 still said RUNNING).
        wait_for(lambda job=launch.target: posts_ended(job), 60, 0.5,
                 f"{launch.name}: every signal-post step ended in accounting")
        posts = [p for p in accounted_steps(launch.target) if "|signal-post|" in p]
        assert len(posts) >= 2 and all(p.endswith("|COMPLETED") for p in posts), (launch.name, posts)
        stops = re.findall(r"stopping after step (\d+): (\w+).*?-> exit (\d+)", log)
        assert stops and {(cause, code) for _, cause, code in stops} == {("user_signal", "140")}, \
            (launch.name, stops)
        assert re.search(r"exited 140 .*requeueing", log), launch.name
        assert f"resumed from step {stops[0][0]} " in log, (launch.name, log[-3000:])
