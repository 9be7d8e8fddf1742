#!/usr/bin/env python3
"""A tick of 20 `job` checks over a queue of 1000 real held jobs on the local cluster,
against one squeue per check (what 20 checks that each ask alone would do), interleaved.

    slurm/dev-cluster up
    SLURM_CONF=$WATCHDOGS_CLUSTER_DIR/slurm.conf .venv/bin/python benchmarks/squeue_tick.py [--rounds 5]

Set-up, part of the measure: every job of ours still queued from earlier runs is
cancelled first, then JOBS held jobs are submitted; before each sample the controller's
job count is read and must be the same as at the start (the samples only read). Per
sample: squeue calls (counted by a PATH shim), wall time, our CPU (process + children)
and slurmctld's CPU. Then the output formats: the fixed `-o` format (filtered and
unfiltered) vs `--json` (which ignores every filter on Slurm 22.05), interleaved too.
Every job it submits is cancelled at the end, whatever happens.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stats import Row, interleave, record, spread

from watchdogs.checks.base import run_check
from watchdogs.checks.context import TickContext
from watchdogs.checks.job import JobCheck
from watchdogs.config.model import CheckConfig, frozen_map
from watchdogs.slurmctl.squeue import FORMAT
from watchdogs.state.store import StateStore

JOBS, CHECKS = 1000, 20
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


def ms(samples: list[float]) -> str:
    return spread(samples).fmt(1000, " ms", 0)


def controller_jobs() -> int:
    """Jobs the controller holds (queued, running and recently finished)."""
    out = subprocess.run(["squeue", "--noheader", "--states=all", "-o", "%i"], capture_output=True,
                         text=True, check=True).stdout
    return len(out.split())


def clean_controller() -> None:
    """Cancel what earlier runs of ours left queued, and wait until none is pending."""
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["scancel", f"--user={user}"], check=False)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "--noheader", f"--user={user}", "--states=PENDING,RUNNING",
                              "-o", "%i"], capture_output=True, text=True, check=True).stdout
        if not out.split():
            return
        time.sleep(0.5)
    raise SystemExit("the controller still has jobs of ours after scancel")


def main() -> None:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    clean_controller()
    start = time.perf_counter()
    ids = submit_held(JOBS)
    held = controller_jobs()
    print(f"submitted {len(ids)} held jobs in {time.perf_counter() - start:.1f}s; the controller "
          f"holds {held} jobs (with recently finished ones)")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            env, log = shim(folder)
            store = StateStore(folder / "state")
            extra: dict[str, dict[str, list[float]]] = {
                k: {"calls": [], "cpu": [], "ctld": []} for k in ("shared", "naive")}

            def sample(name: str, fn: Callable[[StateStore, dict[str, str]], list[str]]) -> float:
                log.write_text("")
                _, wall, cpu, ctld = measure(lambda: fn(store, env))
                extra[name]["calls"].append(len(log.read_text().splitlines()))
                extra[name]["cpu"].append(cpu)
                extra[name]["ctld"].append(ctld)
                return wall

            def same_controller() -> None:
                now = controller_jobs()
                assert now == held, f"the controller changed under the benchmark: {held} -> {now} jobs"
            walls = interleave({"shared": lambda: sample("shared", shared_tick),
                                "naive": lambda: sample("naive", naive_tick)},
                               args.rounds, before_each=same_controller)
            for name, label in (("shared", "shared snapshot"), ("naive", "one squeue per check")):
                e = {k: v[-args.rounds:] for k, v in extra[name].items()}  # not the warm-up
                print(f"{label:22s}: {spread(e['calls']).median:.0f} squeue calls; wall "
                      f"{ms(walls[name])}; our CPU {ms(e['cpu'])}; "
                      f"slurmctld CPU {ms(e['ctld'])}")
                extra[name] = e
            base = ["squeue", "--noheader", "--states=all"]
            names = ",".join(f"{PREFIX}-{i}" for i in range(CHECKS))
            formats = {"-o, filtered (ours)": [*base, "-o", FORMAT, f"--name={names}", "--user=root"],
                       "-o, whole queue": [*base, "-o", FORMAT],
                       "--json (no filters)": ["squeue", "--json"]}
            sizes = {k: len(subprocess.run(v, capture_output=True, check=True).stdout)
                     for k, v in formats.items()}
            timings = interleave({k: partial(_wall, v) for k, v in formats.items()}, args.rounds)
            for label, samples in timings.items():
                print(f"squeue {label:22s}: {spread(samples).fmt(1000, ' ms', 1)}, "
                      f"{sizes[label] / 1024:7.1f} KiB of output")
    finally:
        for chunk in range(0, len(ids), 200):
            subprocess.run(["scancel", *ids[chunk:chunk + 200]], check=False)
        print("cancelled every benchmark job")
    cmd = "SLURM_CONF=... .venv/bin/python benchmarks/squeue_tick.py"
    record(__file__, [Row(
        f"a tick of {CHECKS} `job` checks, {JOBS} held jobs of ours in a controller holding {held}",
        "1 squeue per tick", f"one squeue per check ({CHECKS} calls), interleaved",
        f"{spread(extra['shared']['calls']).median:.0f} call; wall {ms(walls['shared'])} "
        f"vs {ms(walls['naive'])}; our CPU {ms(extra['shared']['cpu'])} "
        f"vs {ms(extra['naive']['cpu'])}; slurmctld CPU "
        f"{ms(extra['shared']['ctld'])} vs {ms(extra['naive']['ctld'])}",
        cmd)])


def _wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    if "SLURM_CONF" not in os.environ:
        sys.exit("set SLURM_CONF to the dev cluster's slurm.conf (slurm/dev-cluster env)")
    main()
