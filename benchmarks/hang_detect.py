#!/usr/bin/env python3
"""How fast a frozen rank ends the job and reaches the user, on the dev cluster.

    WATCHDOGS_CLUSTER_DIR=/tmp/wdc-x slurm/dev-cluster up
    SLURM_CONF=/tmp/wdc-x/slurm.conf .venv/bin/python benchmarks/hang_detect.py [--samples 5]

Each sample: slurm/train_tiny.py with two gloo ranks on two nodes under
slurm/train-requeue.slurm (srun), hang budget floor 2 s, grace 1 s; at step 40 rank 1 gets
SIGSTOP. A foreground `watchdogs run` (tick 1 s, log_stale every 2 s, logfile channel)
watches the job. Reported per sample, from the SIGSTOP:
  detect   rank 0's "HANG" log line (the budget, plus the watchdog's look interval)
  exit     the job is no longer RUNNING: every rank has exited (rank 0 after its report,
           py-spy and the grace; the frozen rank 1 when rank 0 ended the job step)
  alert    the alert line naming the first rank to stop is in the logfile channel
The alternative without the watchdog: the job sits until its time limit (or gloo's
30-minute collective timeout) and nobody is told.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from _stats import Row, record, spread

REPO = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent)
BUDGET, GRACE = 2.0, 1.0


def sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


def state(job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
    match = re.search(r"JobState=(\S+)", out)
    return match.group(1) if match else ""


def wait(what: str, predicate: Callable[[], object], timeout: float = 120.0, every: float = 0.05) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(every)
    raise TimeoutError(what)


def watch_all(conditions: dict[str, Callable[[], bool]], timeout: float = 120.0) -> dict[str, float]:
    """When each condition first held, all polled in one loop (none waits for another)."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(conditions) and time.monotonic() < deadline:
        for name, holds in conditions.items():
            if name not in seen and holds():
                seen[name] = time.monotonic()
        time.sleep(0.05)
    missing = set(conditions) - set(seen)
    if missing:
        raise TimeoutError(", ".join(sorted(missing)))
    return seen


def config(root: Path, name: str) -> Path:
    path = root / "watchdogs.toml"
    path.write_text(f'[scheduler]\nstate_dir = "state"\ntick = "1s"\njob_name = "bench-{name}"\n'
                    f'[alerts]\nnotify = ["log"]\n[[notify]]\nname = "log"\ntype = "logfile"\n'
                    f'path = "alerts.log"\n[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n'
                    f'every = "2s"\n[[check]]\nname = "hung"\ntype = "log_stale"\njob = "train"\n'
                    f'every = "2s"\nheartbeats = "{root / "run" / "heartbeat"}"\nmax_age = "10m"\n')
    return path


def sample(root: Path, index: int) -> tuple[float, float, float]:
    name = f"hangbench-{os.getpid()}-{index}"
    run, steps = root / "run", root / "steps"
    env = ",".join(["ALL", f"PATH={BIN}:{os.environ['PATH']}", f"RUN_DIR={run}", "TRAIN_LAUNCH=srun",
                    "MASTER_ADDR=127.0.0.1", f"TRAINGUARD_HANG_FLOOR={BUDGET}", "TRAINGUARD_HANG_CEILING=30",
                    f"TRAINGUARD_HANG_GRACE={GRACE}", "TRAINGUARD_HEARTBEAT_EVERY=1"])
    job = sh("sbatch", "--parsable", f"--export={env}", "-N", "2", "-n", "2", "-J", name,
             "-o", str(root / "out.log"), str(REPO / "slurm" / "train-requeue.slurm"),
             "--steps", "100000", "--step-sleep", "0.03", "--save-every", "25",
             "--step-log", str(steps)).strip()
    scheduler = subprocess.Popen([sys.executable, "-m", "watchdogs", "--config", str(config(root, name)),
                                  "run"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait("step 40", lambda: steps.exists() and steps.read_text().count("\n") >= 40)
        beat = json.loads((run / "heartbeat" / "rank-1.json").read_text())
        os.kill(int(beat["pid"]), 19)           # SIGSTOP
        stopped = time.monotonic()
        out, alerts = root / "out.log", root / "alerts.log"
        events = watch_all({
            "detect": lambda: "HANG: no progress" in out.read_text(),
            "exit": lambda: state(job) != "RUNNING",
            "alert": lambda: alerts.exists() and "first to stop: rank 1" in alerts.read_text()})
        return events["detect"] - stopped, events["exit"] - stopped, events["alert"] - stopped
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=30)
        subprocess.run(["scancel", job], check=False)
        wait("job gone", lambda: state(job) in ("", "CANCELLED", "COMPLETED", "FAILED"), timeout=60,
             every=0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    results = []
    for index in range(args.samples):
        with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
            results.append(sample(Path(tmp), index))
            print(f"sample {index + 1}: detect {results[-1][0]:.1f} s, exit {results[-1][1]:.1f} s, "
                  f"alert {results[-1][2]:.1f} s", flush=True)
    print(f"{datetime.now():%Y-%m-%d %H:%M}, {args.samples} samples; budget {BUDGET:g} s (floor), "
          f"grace {GRACE:g} s; seconds from SIGSTOP of rank 1")
    print(f"{'':8} {'min':>6} {'median':>7} {'max':>6}")
    for i, label in enumerate(("detect", "exit", "alert")):
        values = [r[i] for r in results]
        print(f"{label:8} {min(values):6.1f} {statistics.median(values):7.1f} {max(values):6.1f}")
    detect, leave, alert = (spread([r[i] for r in results]) for i in range(3))
    record(__file__, [Row(
        f"a frozen rank (SIGSTOP) of 2 gloo ranks on 2 nodes, hang floor {BUDGET:g} s, grace {GRACE:g} s: "
        "seconds to the HANG log line, to every rank gone, to the alert",
        f"detect ≤ floor + one look ({BUDGET + 0.25:g} s); alert before the job's time limit",
        "no watchdog: the job sits until its time limit (gloo's collective timeout: 30 min), no one told",
        f"detect {detect.fmt(unit=' s', digits=1)}; exit {leave.fmt(unit=' s', digits=1)}; "
        f"alert {alert.fmt(unit=' s', digits=1)}",
        f"SLURM_CONF=... .venv/bin/python benchmarks/hang_detect.py --samples {args.samples}")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
