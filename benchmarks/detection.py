#!/usr/bin/env python3
"""How long after a job vanishes, or a node is drained, the alert is written, with the
default config (no `every`, no `tick`: job and nodes checks every 30s, tick 10s), on the
local dev cluster, through the real scheduler (`watchdogs run`) and a logfile channel.

Each sample waits until the check has seen the healthy state, then a random 0-30s more (so
the event lands anywhere in the check's period), then scancels the job (or drains a node)
and times until the alert line appears. Job and node samples alternate (J, N, J, N, ...).

The controller load the defaults cost is counted, not computed: the scheduler runs with a
PATH in which squeue, sinfo, sacct and scontrol are logging shims, and calls per hour are
the calls logged over the run.

    slurm/dev-cluster up
    SLURM_CONF=$WATCHDOGS_CLUSTER_DIR/slurm.conf .venv/bin/python benchmarks/detection.py

Its job is cancelled and the node resumed at the end, whatever happens.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import Row, record, spread

SAMPLES = 5
NODE = "node3"
PREFIX = f"detect{os.getpid()}"
WATCHED = ("squeue", "sinfo", "sacct", "scontrol")
CONFIG = """
[scheduler]
state_dir = "{state}"
cron_dir = "{cron}"

[alerts]
notify = ["log"]

[[notify]]
name = "log"
type = "logfile"
path = "{log}"

[[check]]
name = "train"
type = "job"
job_name = "{job}"

[[check]]
name = "nodes"
type = "nodes"
"""


def wait_for(what: str, condition: Callable[[], bool], timeout: float = 180.0, poll: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(poll)


def shims(folder: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose Slurm commands log "<time> <command>" and run the real one."""
    log = folder / "slurm-calls.log"
    for name in WATCHED:
        real = shutil.which(name)
        (folder / name).write_text(f'#!/bin/sh\necho "$(date +%s) {name}" >> {log}\nexec {real} "$@"\n')
        (folder / name).chmod(0o700)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}, log


class Site:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.alerts = folder / "alerts.log"
        self.config = folder / "watchdogs.toml"
        (folder / "cron.d").mkdir()
        self.config.write_text(CONFIG.format(state=folder / "state", cron=folder / "cron.d",
                                             log=self.alerts, job=PREFIX))
        self.alerts.touch()

    def status(self, item: str) -> tuple[str | None, float | None]:
        """The item's last result and when that run started."""
        proc = subprocess.run([sys.executable, "-m", "watchdogs", "--json", "-c", str(self.config), "status"],
                              capture_output=True, text=True, check=False)
        for row in json.loads(proc.stdout or "{}").get("items", []):
            if row["item"] == item:
                return row["status"], row["last_run"]
        return None, None

    def healthy_since(self, item: str, since: float) -> bool:
        status, started = self.status(item)
        return status == "OK" and started is not None and started >= since

    def alerted(self, offset: int, *words: str) -> bool:
        """Whether a line holding every word was appended past `offset`."""
        with self.alerts.open() as fh:
            fh.seek(offset)
            text = fh.read()
        return any(all(w in line for w in words) for line in text.splitlines())


def timed(site: Site, act: Callable[[], object], *words: str) -> float:
    offset = site.alerts.stat().st_size
    time.sleep(random.uniform(0, 30))
    start = time.time()
    act()
    wait_for(f"an alert with {words}", lambda: site.alerted(offset, *words), timeout=600, poll=0.1)
    return time.time() - start


def job_sample(site: Site) -> float:
    submitted = time.time()
    job = subprocess.run(["sbatch", "--parsable", f"--job-name={PREFIX}", "-p", "debug", "--output=/dev/null",
                          "--wrap", "sleep 3600"], capture_output=True, text=True, check=True).stdout.strip()
    wait_for("the job check to see it running", lambda: site.healthy_since("train", submitted))
    return timed(site, lambda: subprocess.run(["scancel", job], check=True), "train", "CRITICAL")


def node_sample(site: Site) -> float:
    begun = time.time()
    wait_for("the nodes check to see every node usable", lambda: site.healthy_since("nodes", begun))
    took = timed(site, lambda: subprocess.run(
        ["scontrol", "update", f"nodename={NODE}", "state=drain", "reason=detection benchmark"], check=True),
        "WARNING", "nodes", NODE)
    subprocess.run(["scontrol", "update", f"nodename={NODE}", "state=resume"], check=True)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=SAMPLES)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        site = Site(folder)
        env, calls = shims(folder)
        started = time.time()
        with (folder / "scheduler.log").open("w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "watchdogs", "-c", str(site.config), "run"],
                                    env=env, stdout=out, stderr=subprocess.STDOUT)
        found: dict[str, list[float]] = {"vanished job": [], f"drained node ({NODE})": []}
        try:
            for i in range(args.samples):
                found["vanished job"].append(job_sample(site))
                found[f"drained node ({NODE})"].append(node_sample(site))
                print(f"sample {i + 1}: job {found['vanished job'][-1]:5.1f}s, "
                      f"node {found[f'drained node ({NODE})'][-1]:5.1f}s", flush=True)
        finally:
            ended = time.time()
            proc.terminate()
            proc.wait(timeout=60)
            subprocess.run(["scancel", f"--name={PREFIX}"], check=False)
            subprocess.run(["scontrol", "update", f"nodename={NODE}", "state=resume"], check=False,
                           capture_output=True)
        print(f"\ndefault config (job and nodes every 30s, tick 10s), {args.samples} samples each, "
              "interleaved; seconds from the event to the alert line, min / median / max")
        for what, times in found.items():
            print(f"  {what:22s} {min(times):5.1f} / {statistics.median(times):5.1f} / {max(times):5.1f}")
        hours = (ended - started) / 3600
        logged = [line.split()[1] for line in calls.read_text().splitlines()] if calls.exists() else []
        load = ", ".join(f"{name} {logged.count(name) / hours:.0f}" for name in WATCHED)
        print(f"controller calls by the scheduler over {hours * 60:.1f} min, per hour: {load}")
        record(__file__, [Row(
            "detection with the default config (job and nodes every 30s, tick 10s): scancel → alert line, "
            "drain → alert line; controller calls per hour", "≤ 60 s; 1 squeue + 1 sinfo a tick",
            "the former default, every 5m: 183–250 s and 179–218 s (issue 14, median of 3)",
            f"job {spread(found['vanished job']).fmt(1, ' s', 1)}; node "
            f"{spread(found[f'drained node ({NODE})']).fmt(1, ' s', 1)}; per hour: {load}",
            "SLURM_CONF=... .venv/bin/python benchmarks/detection.py")])


if __name__ == "__main__":
    if "SLURM_CONF" not in os.environ:
        sys.exit("set SLURM_CONF to the dev cluster's slurm.conf (slurm/dev-cluster env)")
    main()
