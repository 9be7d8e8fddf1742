#!/usr/bin/env python3
"""Tick CPU as the controller gets busy: 20 `job` checks while the controller holds 1,000,
10,000 and 20,000 jobs, on the local dev cluster.

Setup (the controller's state is part of it):
  * the controller must start nearly empty (`slurm/dev-cluster down && slurm/dev-cluster up`):
    the benchmark refuses to run when WATCHED_USER already has jobs there (cancelled ones count:
    squeue --states=all shows them for MinJobAge);
  * 20 checks watch a job name each, of the user WATCHED_USER (`users = ["daemon"]`); each
    name has one held job of that user. The watchdog runs as a user, not as root, on a real
    cluster, and that matters: Slurm's squeue asks the controller for one user's jobs only
    (slurm_load_job_user) when `--user` names exactly one user whose uid is not 0; for root
    (uid 0) it falls back to fetching every job and filtering on the client, which is what
    this benchmark measured before it watched a non-root user's jobs;
  * the rest of the queue are held jobs of another user (`sbatch --uid`, so root only), as on a
    shared cluster; sizes are reached by topping up, smallest first, and the count printed is
    what `squeue --states=all` reports at the time of the measurement.

Variants, interleaved (A, B, C, A, B, C, ...), SAMPLES ticks each per size:
  * "one snapshot (ours)": the 20 checks in one tick: one squeue filtered by the controller
    (--user, --name), rows indexed once;
  * "of which the squeue call": the same squeue command alone (Slurm's share: with one
    non-root user the controller sends that user's jobs only; names are still filtered by
    the squeue client, among that user's jobs);
  * "one squeue per check": each check in a tick of its own (what 20 independent checks do);
  * "one snapshot + a regex check": 19 name checks and one `job_regex` check: a regex cannot
    be asked by name, so the name filter goes and every job of the watched user comes back.
CPU is this process plus its children (the squeue processes), in ms per tick; slurmctld's
CPU over the same tick is read from /proc. squeue calls are counted by the tick's runner.

    slurm/dev-cluster down; slurm/dev-cluster up
    SLURM_CONF=$WATCHDOGS_CLUSTER_DIR/slurm.conf .venv/bin/python benchmarks/squeue_scale.py

Every job it submits is cancelled at the end, whatever happens.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import Row, record, spread

from watchdogs.checks.base import run_check
from watchdogs.checks.context import TickContext
from watchdogs.checks.job import JobCheck
from watchdogs.config.model import CheckConfig, frozen_map
from watchdogs.slurmctl.jobspec import plan_queries
from watchdogs.slurmctl.runner import DEFAULT_TIMEOUT_S, SlurmReply, run_slurm
from watchdogs.slurmctl.users import resolve_users
from watchdogs.state.store import StateStore

CHECKS, SAMPLES = 20, 5
PREFIX = f"scale{os.getpid()}"
FILLER_USER = "nobody"
WATCHED_USER = "daemon"  # any non-root account: the jobs the watchdog's user would own


class CountingRunner:
    """run_slurm, counting the squeue calls of a tick."""

    def __init__(self) -> None:
        self.squeue = 0

    def __call__(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S,
                 env: Mapping[str, str] | None = None, input_text: str | None = None) -> SlurmReply:
        self.squeue += argv[0] == "squeue"
        return run_slurm(argv, timeout, env, input_text)


def sbatch(name: str, uid: str | None) -> str:
    argv = ["sbatch", "--parsable", "--hold", f"--job-name={name}", "--output=/dev/null",
            "--wrap", "true"]
    if uid:
        argv.insert(1, f"--uid={uid}")
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip().split(";")[0]


def submit(names: Sequence[str], uid: str | None = None) -> list[str]:
    with ThreadPoolExecutor(4) as pool:  # sbatch waits on the controller; 4 keep it busy
        return list(pool.map(lambda n: sbatch(n, uid), names))


def records(*flags: str) -> int:
    out = subprocess.run(["squeue", "--noheader", "--states=all", "-o", "%i", *flags],
                         capture_output=True, text=True, check=True).stdout
    return len(out.splitlines())


def max_job_count() -> int:
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"^MaxJobCount\s*=\s*(\d+)", out, re.M)
    return int(found.group(1)) if found else 10000


def slurmctld_cpu() -> float:
    conf = Path(os.environ["SLURM_CONF"])
    pid = json.loads((conf.parent / "pids.json").read_text())["slurmctld"]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def our_cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def checks(regex: bool = False) -> list[JobCheck]:
    made = []
    for i in range(CHECKS):
        opts: dict[str, object] = {"job_name": f"{PREFIX}-w{i}", "users": (WATCHED_USER,)}
        if regex and i == 0:
            opts = {"job_regex": re.compile(re.escape(f"{PREFIX}-w0") + ".*"), "users": (WATCHED_USER,)}
        made.append(JobCheck(CheckConfig(name=f"c{i}", type="job", every=30.0, options=frozen_map(opts))))
    return made


def one_snapshot(store: StateStore, runner: CountingRunner, regex: bool = False) -> list[str]:
    watched = checks(regex)
    ctx = TickContext(datetime.now().astimezone(), store, watched, runner=runner)
    return [run_check(c, ctx).summary for c in watched]


def per_check(store: StateStore, runner: CountingRunner) -> list[str]:
    out = []
    for check in checks():
        ctx = TickContext(datetime.now().astimezone(), store, [check], runner=runner)
        out.append(run_check(check, ctx).summary)
    return out


def squeue_alone(store: StateStore, runner: CountingRunner) -> list[str]:
    """Our tick's one squeue command and nothing else: Slurm's share of our CPU."""
    watched = checks()
    [query] = plan_queries([c.spec for c in watched], {(WATCHED_USER,): resolve_users((WATCHED_USER,))})
    runner(query.argv())
    return ["queued"] * CHECKS


VARIANTS: dict[str, Callable[[StateStore, CountingRunner], list[str]]] = {
    "one snapshot (ours)": one_snapshot,
    "  of which the squeue call": squeue_alone,
    "one squeue per check": per_check,
    "one snapshot + a regex check": lambda store, runner: one_snapshot(store, runner, regex=True),
}


def sample(fn: Callable[[StateStore, CountingRunner], list[str]], store: StateStore) -> dict[str, float]:
    runner = CountingRunner()
    wall, cpu, ctld = time.perf_counter(), our_cpu(), slurmctld_cpu()
    summaries = fn(store, runner)
    found = {"wall": time.perf_counter() - wall, "cpu": our_cpu() - cpu,
             "ctld": slurmctld_cpu() - ctld, "calls": runner.squeue}
    wrong = [s for s in summaries if not s.startswith("queued")]
    if wrong:  # every check must still see its own held job
        raise SystemExit(f"a check lost its job: {wrong[:3]}")
    return found


def text_spread(values: Sequence[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"{ms[0]:6.1f} / {statistics.median(ms):6.1f} / {ms[-1]:6.1f}"


def measure(size: int, store: StateStore) -> Row:
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for fn in VARIANTS.values():  # warm-up, not counted: imports and the SQLite schema
        fn(store, CountingRunner())
    for _ in range(SAMPLES):
        for name, fn in VARIANTS.items():
            runs[name].append(sample(fn, store))
    total, own = records(), records(f"--user={WATCHED_USER}")
    print(f"\n{total} jobs in the controller ({own} of {WATCHED_USER}, {CHECKS} watched), {SAMPLES} ticks "
          "each, interleaved; ms min / median / max")
    print(f"  {'variant':30s} {'our CPU (+squeue)':>26s} {'wall':>26s} {'slurmctld CPU':>26s} squeue calls")
    for name, found in runs.items():
        cpu, wall, ctld = (text_spread([r[key] for r in found]) for key in ("cpu", "wall", "ctld"))
        print(f"  {name:30s} {cpu:>26s} {wall:>26s} {ctld:>26s} {int(found[0]['calls']):>5d}")
    ours, alone, naive = (runs[k] for k in ("one snapshot (ours)", "  of which the squeue call",
                                             "one squeue per check"))

    def ms(found: list[dict[str, float]], key: str = "cpu", digits: int = 1) -> str:
        return spread([r[key] for r in found]).fmt(1000, " ms", digits)
    return Row(f"tick CPU (ours + squeue), 20 `job` checks, {total:,} jobs in the controller "
               f"({own} watched, of a non-root user)",
               "≤ 50 ms at 10,000 jobs", "one squeue per check (20 calls), interleaved",
               f"{ms(ours)}, of which the squeue call {ms(alone)}; vs {ms(naive)}; slurmctld "
               f"{ms(ours, 'ctld', 0)} vs {ms(naive, 'ctld', 0)}",
               "SLURM_CONF=... .venv/bin/python benchmarks/squeue_scale.py (fresh cluster, as root)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,20000", help="jobs in the controller, ascending")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if records(f"--user={WATCHED_USER}") > 0:
        sys.exit(f"{WATCHED_USER} already has jobs in the controller (cancelled ones count for MinJobAge): "
                 "start from a fresh one: slurm/dev-cluster down; slurm/dev-cluster up")
    try:
        submit([f"{PREFIX}-w{i}" for i in range(CHECKS)], uid=WATCHED_USER)
        with tempfile.TemporaryDirectory() as tmp:
            store = StateStore(Path(tmp) / "state")
            rows = []
            limit = max_job_count() - 1  # the controller refuses the job that would reach it
            for size in sizes:
                need = min(size, limit) - records()
                start = time.perf_counter()
                submit([f"{PREFIX}-fill"] * max(0, need), uid=FILLER_USER)
                print(f"(topped up with {max(0, need)} held jobs of {FILLER_USER} in "
                      f"{time.perf_counter() - start:.0f}s)", flush=True)
                rows.append(measure(size, store))
            record(__file__, rows)
    finally:
        # scancel --name takes one name (a comma list matches nothing): one call per name.
        for user, names in ((FILLER_USER, [f"{PREFIX}-fill"]),
                            (WATCHED_USER, [f"{PREFIX}-w{i}" for i in range(CHECKS)])):
            for name in names:
                subprocess.run(["scancel", f"--user={user}", f"--name={name}"], check=False)
        print("cancelled every benchmark job")


if __name__ == "__main__":
    if "SLURM_CONF" not in os.environ:
        sys.exit("set SLURM_CONF to the dev cluster's slurm.conf (slurm/dev-cluster env)")
    main()
