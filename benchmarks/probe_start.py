#!/usr/bin/env python3
"""The filesystem probe's child process: started for every probe of every `disk` and
`log_stale` check (a statvfs, the newest log file, heartbeats, a scan), so its start is
part of the scheduler's steady cost.

Interleaved (n rounds of each in turn), CPU of the child (user + system) and wall time:
  * "probe child (ours)": the command `watchdogs.fsprobe.bounded.probe_argv` builds today
    (`python -S -c BOOT ...`, each operation importing what it needs);
  * "python -m worker": how the child was started before (`python -m
    watchdogs.fsprobe.worker`, with `site` and everything the worker imported at the top);
  * "python -c pass": the interpreter alone, with `site`.
Each runs the same `statvfs` of /tmp and must print the same answer.

    .venv/bin/python benchmarks/probe_start.py [--samples 15]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import Row, interleave, record, spread

from watchdogs.fsprobe.bounded import WORKER, probe_argv

REQUEST = {"path": "/tmp"}


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv: list[str], cpu: list[float], answers: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one child; its CPU goes to `cpu`, its answer to `answers`."""
    import time

    start, before = time.perf_counter(), children_cpu()
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout
    took = time.perf_counter() - start
    cpu.append(children_cpu() - before)
    answers.append(out)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    commands = {
        "probe child (ours)": probe_argv("statvfs", REQUEST),
        "python -m worker": [sys.executable, "-m", WORKER, "statvfs", json.dumps(REQUEST)],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    answers: dict[str, list[str]] = {name: [] for name in commands}
    # Bytecode cached as after `pip install` (this machine sets PYTHONDONTWRITEBYTECODE,
    # which would make every child compile every module it imports).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="probe-start-pyc-")

    def variant(argv: list[str], name: str) -> Callable[[], float]:
        return lambda: timed(argv, cpu[name], answers[name], env)
    walls = interleave({name: variant(argv, name) for name, argv in commands.items()}, args.samples)
    ours, before = (json.loads(answers[k][-1])["result"] for k in ("probe child (ours)", "python -m worker"))
    if ours["bytes_total"] != before["bytes_total"]:
        raise SystemExit(f"the two children disagree: {ours} vs {before}")
    print(f"ms, min / median / max of {args.samples}, interleaved: CPU | wall")
    for name in commands:
        samples = cpu[name][-args.samples:]  # the warm-up's sample is not one
        print(f"  {name:20s} {spread(samples).fmt(1000, ' ms', 1):>28s} | "
              f"{spread(walls[name]).fmt(1000, ' ms', 1)}")

    def ms(name: str) -> str:
        return spread(cpu[name][-args.samples:]).fmt(1000, " ms", 1)
    record(__file__, [Row(
        "probe child start-up (a statvfs probe, started for every probe of every disk/log_stale "
        "check), CPU", "", "`python -m watchdogs.fsprobe.worker` (how it started before), interleaved",
        f"{ms('probe child (ours)')} vs {ms('python -m worker')}; python -c pass {ms('python -c pass')}",
        ".venv/bin/python benchmarks/probe_start.py")])


if __name__ == "__main__":
    main()
