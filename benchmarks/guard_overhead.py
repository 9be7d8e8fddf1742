#!/usr/bin/env python3
"""Per-step cost of trainguard's poll point, single process, every feature on.

    .venv/bin/python benchmarks/guard_overhead.py [--steps 200000] [--repeats 15]

Compares, in the same run, on the same loop:
  bare      a loop that does nothing per step
  guard     `guard.check(step)` (kill/save switches, stop file, memory thresholds,
            heartbeat, exit_after: all on; their polls rate-limited)
  step      `guard.step(step)` (check + act when a decision comes)
  naive     what a guard without rate limits does: stat three files and read the RSS
            at every step
and reports the median extra nanoseconds per step over the bare loop, that figure as a
fraction of a 10 ms training step, and the cost of one slow-path poll (the rate-limited
part: file stats, psutil, heartbeat write), amortised over 10 ms steps at its cadence.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainguard import Guard, config_from  # noqa: E402 - after the path set-up above
from trainguard.sensors import MAX_POLL_GAP  # noqa: E402 - after the path set-up above
from trainguard.slurm import JobEnv  # noqa: E402 - after the path set-up above

STEP_10MS_NS = 10_000_000


def make_guard(root: Path) -> Guard:
    config = config_from({}, checkpoint_dir=root / "ckpt", kill_switch=root / "KILL",
                         save_switch=root / "SAVE", stop_file=root / "stop-request",
                         heartbeat_dir=root / "hb", max_rss="64GiB", min_available="1MiB",
                         exit_after="10h", forced_exit=0)
    guard = Guard(config, save=lambda d: None, job=JobEnv()).start()
    guard.resume()
    return guard


def time_loop(body: Callable[[int], object], steps: int) -> int:
    start = time.perf_counter_ns()
    for step in range(steps):
        body(step)
    return time.perf_counter_ns() - start


def naive_body(root: Path) -> Callable[[int], object]:
    process = psutil.Process()
    files = [root / "KILL", root / "SAVE", root / "stop-request"]

    def body(step: int) -> object:
        return [os.path.exists(f) for f in files], process.memory_info().rss
    return body


def _median_ns(prepare: Callable[[], None], guard: Guard, repeats: int = 200) -> float:
    samples = []
    for _ in range(repeats):
        prepare()
        start = time.perf_counter_ns()
        guard._gather(guard._clock())
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples)


def slow_path_ns(guard: Guard) -> dict[str, float]:
    """The rate-limited part, measured source by source: a poll with nothing due, then the
    extra cost of the files, the memory check and the heartbeat write when each is due."""
    sensors, beat = guard.sensors, guard.heartbeat
    assert beat is not None
    far = float("inf")

    def due(files: bool = False, memory: bool = False, heartbeat: bool = False) -> Callable[[], None]:
        def prepare() -> None:
            sensors.next_files = -far if files else far
            sensors.next_memory = -far if memory else far
            beat.next_at = -far if heartbeat else far
        return prepare
    base = _median_ns(due(), guard)
    return {"poll": base, "files": _median_ns(due(files=True), guard) - base,
            "memory": _median_ns(due(memory=True), guard) - base,
            "heartbeat": _median_ns(due(heartbeat=True), guard) - base}


def amortised_ns(costs: dict[str, float], guard: Guard) -> float:
    """Slow-path nanoseconds per 10 ms step at the configured cadences."""
    cfg = guard.config
    per_second = (costs["poll"] / MAX_POLL_GAP + costs["files"] / cfg.file_every
                  + costs["memory"] / cfg.memory_every + costs["heartbeat"] / cfg.heartbeat_every)
    return per_second / (1e9 / STEP_10MS_NS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        guard = make_guard(root)
        bodies: dict[str, Callable[[int], object]] = {
            "bare": lambda step: None, "guard": guard.check, "step": guard.step,
            "naive": naive_body(root)}
        per_step: dict[str, list[float]] = {name: [] for name in bodies}
        for _ in range(args.repeats):          # interleaved, so drifts hit every variant alike
            for name, body in bodies.items():
                steps = args.steps if name != "naive" else args.steps // 20
                per_step[name].append(time_loop(body, steps) / steps)
        costs = slow_path_ns(guard)
        amortised = amortised_ns(costs, guard)
        guard.finish()
    bare = statistics.median(per_step["bare"])
    print(f"python {sys.version.split()[0]}, {args.steps} steps x {args.repeats} repeats; "
          f"median ns per step, extra over the bare loop")
    print(f"{'variant':8} {'ns/step':>9} {'extra ns':>9} {'of a 10 ms step':>16}")
    for name, samples in per_step.items():
        med = statistics.median(samples)
        extra = med - bare
        print(f"{name:8} {med:9.0f} {extra:9.0f} {extra / STEP_10MS_NS:16.2e}")
    print("slow path (rate-limited): " + ", ".join(f"{k} {v / 1000:.1f} us" for k, v in costs.items())
          + f"; at the default cadences = {amortised:.0f} ns per 10 ms step amortised "
          f"({amortised / STEP_10MS_NS:.1e} of the step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
