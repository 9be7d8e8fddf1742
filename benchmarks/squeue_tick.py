#!/usr/bin/env python3
"""A tick of 20 `job` checks over a queue of 1000 real held jobs on the local cluster.

Measures, in the same run:
  * the shared snapshot: number of squeue calls (counted by a PATH shim), wall time, our CPU
    (process + children) and slurmctld's CPU for the whole tick;
  * the alternative: one squeue per check (what 20 naive checks would do);
  * the output format: the fixed `-o` format (filtered and unfiltered) vs `--json` (which
    ignores every filter on Slurm 22.05), each repeated and the median kept.

    slurm/dev-cluster up
    SLURM_CONF=/tmp/watchdogs-dev-cluster/slurm.conf .venv/bin/python benchmarks/squeue_tick.py

Every job it submits is cancelled at the end, whatever happens.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from watchdogs.checks.base import run_check
from watchdogs.checks.context import TickContext
from watchdogs.checks.job import JobCheck
from watchdogs.config.model import CheckConfig, frozen_map
from watchdogs.slurmctl.squeue import FORMAT
from watchdogs.state.store import StateStore

JOBS, CHECKS, REPEAT = 1000, 20, 5
T = TypeVar("T")
PREFIX = f"bench{os.getpid()}"


def submit_held(count: int) -> list[str]:
    ids = []
    for i in range(count):
        out = subprocess.run(["sbatch", "--parsable", "--hold", f"--job-name={PREFIX}-{i % CHECKS}",
                              "--output=/dev/null", "--wrap", "true"],
                             capture_output=True, text=True, check=True).stdout
        ids.append(out.strip().split(";")[0])
    return ids


def slurmctld_cpu() -> float:
    """CPU seconds used so far by this cluster's slurmctld (from its pid file)."""
    conf = Path(os.environ["SLURM_CONF"])
    pid = json.loads((conf.parent / "pids.json").read_text())["slurmctld"]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def our_cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(fn: Callable[[], T]) -> tuple[T, float, float, float]:
    wall, cpu, ctld = time.perf_counter(), our_cpu(), slurmctld_cpu()
    value = fn()
    return value, time.perf_counter() - wall, our_cpu() - cpu, slurmctld_cpu() - ctld


def shim(folder: Path) -> tuple[dict[str, str], Path]:
    log = folder / "calls.log"
    real = subprocess.run(["which", "squeue"], capture_output=True, text=True, check=True).stdout.strip()
    (folder / "squeue").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real} "$@"\n')
    (folder / "squeue").chmod(0o700)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}, log


def checks() -> list[JobCheck]:
    return [JobCheck(CheckConfig(name=f"c{i}", type="job", every=60.0,
                                 options=frozen_map({"job_name": f"{PREFIX}-{i}"})))
            for i in range(CHECKS)]


def shared_tick(store: StateStore, env: dict[str, str]) -> list[str]:
    watched = checks()
    ctx = TickContext(datetime.now().astimezone(), store, watched, env)
    return [run_check(c, ctx).status.name for c in watched]


def naive_tick(store: StateStore, env: dict[str, str]) -> list[str]:
    """Each check alone in its tick: one squeue per check."""
    out = []
    for check in checks():
        ctx = TickContext(datetime.now().astimezone(), store, [check], env)
        out.append(run_check(check, ctx).status.name)
    return out


def time_command(argv: list[str]) -> tuple[float, int]:
    runs, size = [], 0
    for _ in range(REPEAT):
        start = time.perf_counter()
        size = len(subprocess.run(argv, capture_output=True, check=True).stdout)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), size


def main() -> None:
    start = time.perf_counter()
    ids = submit_held(JOBS)
    print(f"submitted {len(ids)} held jobs in {time.perf_counter() - start:.1f}s")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            env, log = shim(folder)
            store = StateStore(folder / "state")
            for label, fn in (("shared snapshot", shared_tick), ("one squeue per check", naive_tick)):
                log.write_text("")
                statuses, wall, cpu, ctld = measure(lambda fn=fn: fn(store, env))
                calls = len(log.read_text().splitlines())
                print(f"{label:22s}: {calls:2d} squeue calls, wall {wall * 1000:7.1f} ms, "
                      f"our CPU {cpu * 1000:7.1f} ms, slurmctld CPU {ctld * 1000:6.1f} ms; "
                      f"statuses {sorted(set(statuses))}")
            base = ["squeue", "--noheader", "--states=all"]
            names = ",".join(f"{PREFIX}-{i}" for i in range(CHECKS))
            variants = (("-o, filtered (ours)", [*base, "-o", FORMAT, f"--name={names}", "--user=root"]),
                        ("-o, whole queue", [*base, "-o", FORMAT]),
                        ("--json (no filters)", ["squeue", "--json"]))
            for label, argv in variants:
                median, size = time_command(argv)
                print(f"squeue {label:22s}: median {median * 1000:7.1f} ms over {REPEAT} runs, "
                      f"{size / 1024:7.1f} KiB of output")
    finally:
        for chunk in range(0, len(ids), 200):
            subprocess.run(["scancel", *ids[chunk:chunk + 200]], check=False)
        print("cancelled every benchmark job")


if __name__ == "__main__":
    if "SLURM_CONF" not in os.environ:
        sys.exit("set SLURM_CONF to the dev cluster's slurm.conf (slurm/dev-cluster env)")
    main()
