#!/usr/bin/env python3
"""How a tick asks accounting about ended jobs: ONE batched `sacct -j a,b,c...` for 20 job
checks against one `sacct -j N` per check (what 20 independent checks would do), with at
least 1,000 jobs in accounting, on the dev cluster's real slurmdbd + MariaDB.

Interleaved (batched, per-check, batched, ...), SAMPLES of each; reports min/median/max of
the wall time, our CPU (the sacct processes) and the accounting side's CPU (slurmdbd +
mariadbd, from the PIDs the dev cluster recorded).

    slurm/dev-cluster up
    SLURM_CONF=$WATCHDOGS_CLUSTER_DIR/slurm.conf .venv/bin/python benchmarks/sacct_tick.py

Setup (part of the measure's conditions, printed): when accounting holds fewer than
1,000 jobs, a job array of tiny jobs tops it up (about 2-3 min on 2 cores), and waits until
accounting has recorded them.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _stats import Row, record, spread

from watchdogs.slurmctl.runner import run_slurm
from watchdogs.slurmctl.sacct import run_sacct

JOBS, CHECKS, SAMPLES = 1000, 20, 7
TIMEOUT = 60.0


def accounting_jobs() -> list[str]:
    out = subprocess.run(["sacct", "-a", "-X", "-n", "-P", "-S", "2000-01-01", "-o", "JobIDRaw,State"],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("|")[0] for line in out.splitlines()
            if "|" in line and line.split("|")[1] not in ("PENDING", "RUNNING")]


def top_up(have: int) -> None:
    missing = JOBS - have
    print(f"setup: accounting holds {have} finished jobs; running an array of {missing} tiny jobs",
          flush=True)
    array = subprocess.run(["sbatch", "--parsable", f"--array=0-{missing - 1}", "--output=/dev/null",
                            "--job-name=sacct-bench", "--wrap", "true"],
                           capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    while subprocess.run(["squeue", "-h", "-j", array, "-o", "%i"], capture_output=True,
                         text=True).stdout.strip():
        time.sleep(3)
    deadline = time.monotonic() + 120
    while len(accounting_jobs()) < JOBS and time.monotonic() < deadline:
        time.sleep(2)


def daemon_cpu() -> float:
    """CPU seconds used so far by this cluster's slurmdbd and mariadbd."""
    pids = json.loads((Path(os.environ["SLURM_CONF"]).parent / "pids.json").read_text())
    total = 0.0
    for name in ("slurmdbd", "mariadb"):
        fields = Path(f"/proc/{pids[name]}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sample(call: Callable[[], int]) -> tuple[float, float, float, int]:
    wall0, ours0, dbd0 = time.perf_counter(), children_cpu(), daemon_cpu()
    records = call()
    return (time.perf_counter() - wall0, children_cpu() - ours0, daemon_cpu() - dbd0, records)


def stats(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{min(ms):7.1f} {statistics.median(ms):7.1f} {max(ms):7.1f}"


def main() -> None:
    if "SLURM_CONF" not in os.environ:
        sys.exit("set SLURM_CONF to the dev cluster's slurm.conf (slurm/dev-cluster env)")
    jobs = accounting_jobs()
    if len(jobs) < JOBS:
        top_up(len(jobs))
        jobs = accounting_jobs()
    step = max(1, len(jobs) // CHECKS)
    watched = jobs[::step][:CHECKS]
    print(f"accounting: {len(jobs)} finished jobs; {len(watched)} job checks watch "
          f"{', '.join(watched[:3])}, ... (spread over the whole history)")

    def batched() -> int:
        return len({r.raw_id for r in run_sacct(watched, TIMEOUT, None, run_slurm).values()})

    def per_check() -> int:
        return sum(len({r.raw_id for r in run_sacct([j], TIMEOUT, None, run_slurm).values()})
                   for j in watched)

    variants = {"one batched sacct": batched, f"{CHECKS} sacct (one per check)": per_check}
    results: dict[str, list[tuple[float, float, float, int]]] = {k: [] for k in variants}
    for _ in range(SAMPLES):
        for name, call in variants.items():  # interleaved: A, B, A, B, ...
            results[name].append(sample(call))
    print(f"\n{SAMPLES} samples each, interleaved; min / median / max in ms")
    print(f"{'variant':32} {'wall':>23} {'sacct CPU (ours)':>23} {'slurmdbd+mariadb CPU':>23} records")
    for name, rows in results.items():
        walls, ours, dbd, records = zip(*rows, strict=True)
        print(f"{name:32} {stats(list(walls))} {stats(list(ours))} {stats(list(dbd))} {records[0]}")
    base = statistics.median(r[0] for r in results[next(iter(variants))])
    alt = statistics.median(r[0] for r in results[list(variants)[1]])
    print(f"\nmedian wall: per-check / batched = {alt / base:.1f}x")
    (one, many) = ([spread([r[k] for r in results[name]]) for k in range(3)] for name in variants)
    record(__file__, [Row(
        f"a tick's accounting query for {CHECKS} `job` checks, {len(jobs)} finished jobs in "
        "slurmdbd + MariaDB",
        "1 sacct per tick", f"one sacct per check ({CHECKS} calls), interleaved",
        f"wall {one[0].fmt(1e3, ' ms', 0)} vs {many[0].fmt(1e3, ' ms', 0)}; sacct CPU "
        f"{one[1].fmt(1e3, ' ms', 1)} vs {many[1].fmt(1e3, ' ms', 1)}; slurmdbd+mariadb CPU "
        f"{one[2].fmt(1e3, ' ms', 0)} vs {many[2].fmt(1e3, ' ms', 0)}",
        "SLURM_CONF=... .venv/bin/python benchmarks/sacct_tick.py")])


if __name__ == "__main__":
    main()
