#!/usr/bin/env python3
"""What a `job` check with `run_dir` pays each tick to read the run's recovery record: one
child process, `python -m trainguard.recovery dump` (bounded: a dead mount cannot hang the
tick), over a record of a busy run (200 suspicions and restarts in 20 host files).

Interleaved (n rounds of each in turn), CPU of the child (user + system) and wall time:
  * "recovery dump (ours)": the child `watchdogs.checks.recoveryrecord.read` starts when the
    record changed (or its reading is 10 min old);
  * "unchanged: newest probe": what a tick pays otherwise (`read_if_changed`'s look at the
    record folder's newest file, the fsprobe worker's fast start);
  * "heartbeats probe": the child a `log_stale` check with `heartbeats` already starts each
    tick (the fsprobe worker's fast start, reading trainguard's heartbeats of 8 ranks);
  * "python -c pass": the interpreter alone, with `site`.

    .venv/bin/python benchmarks/recovery_read.py [--samples 15]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import Row, interleave, record, spread

from trainguard.heartbeat import write_heartbeat
from trainguard.recovery import journal
from watchdogs.fsprobe.bounded import probe_argv


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def busy_run(folder: Path) -> Path:
    """A run folder with 100 suspicions and 100 restarts from 20 hosts, and 8 heartbeats."""
    run = folder / "run"
    for i in range(100):
        os.environ["SLURMD_NODENAME"] = f"node{i % 20}"
        journal.append(run, "suspect", time.time() - 60 * i, f"node{i % 7} suspect",
                       {"node": f"node{i % 7}", "cause": "rank_died", "job": str(i), "step": i, "detail": ""})
        journal.append(run, "restart", time.time() - 60 * i, f"job {i} requeued",
                       {"job": str(i), "restart": "requeue", "cause": "rank_died", "node": "", "step": i,
                        "summary": "x" * 200})
    (run / "heartbeat").mkdir()
    for rank in range(8):
        write_heartbeat(run / "heartbeat", rank, 100, "train", job_id="1")
    return run


def timed(argv: list[str], cpu: list[float], env: dict[str, str]) -> float:
    start, before = time.perf_counter(), children_cpu()
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout
    took = time.perf_counter() - start
    cpu.append(children_cpu() - before)
    if not out.strip():
        raise SystemExit(f"{argv}: no answer")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    run = busy_run(Path(tempfile.mkdtemp(prefix="recovery-read-")))
    commands = {
        "recovery dump (ours)": [sys.executable, "-m", "trainguard.recovery", "dump", "--run-dir", str(run)],
        "unchanged: newest probe": probe_argv("newest", {"pattern": f"{run}/recovery/*"}),
        "heartbeats probe": probe_argv("heartbeats", {"directory": str(run / "heartbeat")}),
        "python -c pass": [sys.executable, "-c", "print(1)"],
    }
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    # Bytecode cached as after `pip install` (this machine sets PYTHONDONTWRITEBYTECODE).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="recovery-read-pyc-")

    def variant(argv: list[str], name: str) -> Callable[[], float]:
        return lambda: timed(argv, cpu[name], env)
    walls = interleave({name: variant(argv, name) for name, argv in commands.items()}, args.samples)

    def ms(name: str) -> str:
        return spread(cpu[name][-args.samples:]).fmt(1000, " ms", 1)
    print(f"ms, min / median / max of {args.samples}, interleaved: CPU | wall")
    for name in commands:
        print(f"  {name:22s} {ms(name):>28s} | {spread(walls[name]).fmt(1000, ' ms', 1)}")
    record(__file__, [Row(
        "reading a run's recovery record (job check with run_dir, once per tick; 200 entries), CPU",
        "", "the heartbeats probe a log_stale check starts each tick, interleaved",
        f"{ms('recovery dump (ours)')} when changed, {ms('unchanged: newest probe')} when not; vs "
        f"{ms('heartbeats probe')}; python -c pass {ms('python -c pass')}",
        ".venv/bin/python benchmarks/recovery_read.py")])


if __name__ == "__main__":
    main()
