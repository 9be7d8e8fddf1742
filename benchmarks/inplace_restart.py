#!/usr/bin/env python3
"""Fault to the first new training step: restart inside the allocation vs a requeue.

    WATCHDOGS_CLUSTER_DIR=/tmp/wdc-x slurm/dev-cluster up
    SLURM_CONF=/tmp/wdc-x/slurm.conf .venv/bin/python benchmarks/inplace_restart.py [--samples 5]

Each sample: slurm/train_tiny.py, two gloo ranks under slurm/train-requeue.slurm (srun), hang
budget floor 2 s, grace 1 s, a checkpoint every 25 steps; at step 40 rank 1 gets SIGSTOP.
  inplace  `sbatch -p spare -N 3`, TRAIN_NODES=2: a new job step on the two other nodes;
  requeue  `sbatch -p spare -N 2` (no spare): the job is requeued, the frozen rank's node in
           ExcNodeList, and waits in the queue as any requeued job does (on this idle
           dev cluster only for the BeginTime Slurm gives a requeued job; on a busy
           cluster add the queue wait).
Measured from the SIGSTOP to the first step logged by the new run. The two alternate, one
sample each in turn (interleaved).

    ... benchmarks/inplace_restart.py --fault node --samples 3     # as root: a node fails

`--fault node`: at step 40 rank 1's node fails like a power loss (`slurm/dev-cluster
node-kill`: slurmd stopped, the node's step frozen), in place only (`-p spare -N 3`,
TRAIN_NODES=2; the requeue path is the one measured above, plus Slurm's node-failure delay);
measured from the node-kill to the first new step; the node is brought back after each sample.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from _stats import Row, interleave, record, spread

REPO = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent)
BUDGET, GRACE = 2.0, 1.0
RESTARTED = {"inplace": re.compile(r"\(in-place restart 1\)"), "requeue": re.compile(r"start: restart 1,")}


def sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


def state(job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
    match = re.search(r"JobState=(\S+)", out)
    return match.group(1) if match else ""


def wait(what: str, predicate: Callable[[], object], timeout: float = 400.0, every: float = 0.05) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(every)
    raise TimeoutError(what)


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def node_state(node: str) -> str:
    # One line per partition of the node: the same state in each.
    return ",".join(sorted(set(sh("sinfo", "-h", "-N", "-n", node, "-o", "%t").split())))


def dev_cluster(*args: str) -> None:
    folder = str(Path(os.environ["SLURM_CONF"]).parent)
    subprocess.run([sys.executable, str(REPO / "slurm" / "dev-cluster"), *args], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "WATCHDOGS_CLUSTER_DIR": folder})


def sample(kind: str, fault: str = "rank") -> float:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        root = Path(tmp)
        run, steps, out = root / "run", root / "steps", root / "out.log"
        env = ",".join(["ALL", f"PATH={BIN}:{os.environ['PATH']}", f"RUN_DIR={run}", "TRAIN_LAUNCH=srun",
                        "MASTER_ADDR=127.0.0.1", f"TRAINGUARD_HANG_FLOOR={BUDGET}",
                        "TRAINGUARD_HANG_CEILING=30", f"TRAINGUARD_HANG_GRACE={GRACE}",
                        "TRAINGUARD_HEARTBEAT_EVERY=1", "TRAIN_NODES=2",
                        f"TRAIN_SCRIPT={REPO / 'slurm' / 'train_tiny.py'}"])
        nodes = "3" if kind == "inplace" else "2"
        job = sh("sbatch", "--parsable", f"--export={env}", "-p", "spare", "-N", nodes,
                 "--ntasks-per-node=1", "-o", str(out), str(REPO / "slurm" / "train-requeue.slurm"),
                 "--steps", "100000", "--step-sleep", "0.03", "--save-every", "25",
                 "--step-log", str(steps)).strip()
        try:
            wait("step 40", lambda: lines(steps) >= 40, timeout=120)
            beat = json.loads((run / "heartbeat" / "rank-1.json").read_text())
            if fault == "node":
                failed = str(beat["host"])
                stopped = time.monotonic()
                dev_cluster("node-kill", failed)
            else:
                os.kill(int(beat["pid"]), 19)           # SIGSTOP
                stopped = time.monotonic()
            wait("restart", lambda: RESTARTED[kind].search(out.read_text()), every=0.1)
            before = lines(steps)
            new_step = wait("a new step", lambda: lines(steps) > before)
            return new_step - stopped
        finally:
            subprocess.run(["scancel", job], check=False)
            wait("job gone", lambda: state(job) in ("", "CANCELLED", "COMPLETED", "FAILED"), timeout=60,
                 every=0.5)
            if fault == "node":
                dev_cluster("node-start", failed)
                wait("node back", lambda: node_state(failed) == "idle", timeout=120, every=0.5)


def slurmd_timeout() -> str:
    """The cluster's SlurmdTimeout (the node-failure delay is mostly Slurm noticing)."""
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    found = re.search(r"^SlurmdTimeout=(\d+)", conf.read_text(), re.MULTILINE) if conf.exists() else None
    return f"{found[1]} s" if found else "Slurm's default"


def node_fault(samples: int) -> int:
    values = [sample("inplace", "node") for _ in range(samples)]
    print(f"{datetime.now():%Y-%m-%d %H:%M}, {samples} samples; seconds from the node-kill of rank 1's "
          f"node to the first new step: " + " ".join(f"{v:.1f}" for v in values))
    record(__file__.replace(".py", "_node.py"), [Row(
        "a training node fails like a power loss (slurmd stopped, its step frozen; SlurmdTimeout "
        f"{slurmd_timeout()}), 2 gloo ranks, --no-kill: seconds to the first new training step "
        "in place on a spare (sbatch -N 3, TRAIN_NODES=2)", "no requeue, no queue wait",
        "a requeue: the frozen-rank requeue above plus Slurm's node-failure delay",
        f"in place {spread(values).fmt(unit=' s', digits=1)}",
        f"SLURM_CONF=... .venv/bin/python benchmarks/inplace_restart.py --fault node --samples {samples}")])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--fault", choices=("rank", "node"), default="rank")
    args = parser.parse_args()
    if args.fault == "node":
        return node_fault(args.samples)
    samples = interleave({"inplace": lambda: sample("inplace"), "requeue": lambda: sample("requeue")},
                         args.samples, warmup=0)
    print(f"{datetime.now():%Y-%m-%d %H:%M}, {args.samples} samples each, interleaved; seconds from "
          f"SIGSTOP of rank 1 to the first new step")
    for kind, values in samples.items():
        print(f"{kind:8} " + " ".join(f"{v:.1f}" for v in values))
    inplace, requeue = spread(samples["inplace"]), spread(samples["requeue"])
    record(__file__, [Row(
        f"a frozen rank (SIGSTOP) of 2 gloo ranks, hang floor {BUDGET:g} s, grace {GRACE:g} s: seconds "
        "to the first new training step, restarted in place on a spare node (sbatch -N 3, TRAIN_NODES=2)",
        "far below a requeue's",
        f"requeue with the node excluded (sbatch -N 2, idle dev cluster): {requeue.fmt(unit=' s', digits=1)}",
        f"in place {inplace.fmt(unit=' s', digits=1)}",
        f"SLURM_CONF=... .venv/bin/python benchmarks/inplace_restart.py --samples {args.samples}")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
