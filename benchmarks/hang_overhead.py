#!/usr/bin/env python3
"""Per-step cost of trainguard's progress watchdog (trainguard.hangs.watch), single process.

    .venv/bin/python benchmarks/hang_overhead.py [--steps 200000] [--repeats 9]

Compares, in the same run, interleaved (A, B, C, A, B, C...), on the same loop:
  bare      a loop that does nothing per step
  guard     `guard.check(step)` with the hang watchdog off (hang_detect = false)
  hang      `guard.check(step)` with the hang watchdog on, its thread looking 4 times a
            second (hang_floor = 2 s: far more often than with the default floor of 300 s;
            policy report-only, so a pause of the machine cannot end the benchmark)
and reports min/median/max ns per step and the median extra over the bare loop. The
watchdog adds nothing to the poll point itself; what it can cost is its thread taking the
GIL from the loop when it looks.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stats import Row, record, spread

from trainguard import REPORT_ONLY, Guard, config_from
from trainguard.slurm.job import JobEnv


def make_guard(root: Path, hang: bool) -> Guard:
    config = config_from({}, checkpoint_dir=root / "ckpt", heartbeat_dir=root / "hb", exit_after="10h",
                         forced_exit=0, hang_detect=hang, hang_floor=2, hang_ceiling=60,
                         hang_first_step=60).with_policy({"hang": REPORT_ONLY})
    guard = Guard(config, save=lambda d: None, job=JobEnv()).start()
    guard.resume()
    return guard


def time_loop(body: Callable[[int], object], steps: int) -> float:
    start = time.perf_counter_ns()
    for step in range(steps):
        body(step)
    return (time.perf_counter_ns() - start) / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off, on = make_guard(Path(tmp) / "off", False), make_guard(Path(tmp) / "on", True)
        assert on.hang is not None and on.hang.alive and off.hang is None
        bodies: dict[str, Callable[[int], object]] = {"bare": lambda step: None, "guard": off.check,
                                                      "hang": on.check}
        samples: dict[str, list[float]] = {name: [] for name in bodies}
        for _ in range(args.repeats):
            for name, body in bodies.items():
                samples[name].append(time_loop(body, args.steps))
        learned = on.hang.budget.budget
        off.finish()
        on.finish()
    bare = statistics.median(samples["bare"])
    print(f"python {sys.version.split()[0]}, {args.steps} steps x {args.repeats} repeats, interleaved; "
          f"ns per step (the watchdog learned a budget of {learned:.1f} s)")
    print(f"{'variant':8} {'min':>7} {'median':>7} {'max':>7} {'extra (median)':>15}")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"{name:8} {min(values):7.0f} {med:7.0f} {max(values):7.0f} {med - bare:15.0f}")
    extra = {name: spread([v - b for v, b in zip(samples[name], samples["bare"], strict=True)])
             for name in ("guard", "hang")}
    record(__file__, [Row(
        "hang watchdog's cost per step: `guard.check` with the watchdog on (looking 4×/s) against off",
        "no extra over the guard without it (noise); guard < 1 µs per step",
        "the same guard with `hang_detect = false`; a bare loop; interleaved",
        f"on {extra['hang'].fmt(unit=' ns', digits=0)} vs off {extra['guard'].fmt(unit=' ns', digits=0)} "
        "over the bare loop",
        f".venv/bin/python benchmarks/hang_overhead.py --repeats {args.repeats}")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
