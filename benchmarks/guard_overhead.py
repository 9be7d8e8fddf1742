#!/usr/bin/env python3
"""Per-step cost of trainguard's poll point, `guard.step(step)` as the README tells users to
call it, over a bare `for` loop with `pass`, on an idle and on a loaded machine.

    .venv/bin/python benchmarks/guard_overhead.py [--steps 200000] [--rounds 7]

Variants, interleaved (bare, step, check, bare, step, check, ...), each a loop of --steps:
  bare      `for step in range(n): pass`          (the baseline a user would pick)
  step      `for step in range(n): guard.step(step)` (every feature on: kill/save switches,
            stop file, memory thresholds, heartbeat, exit_after; their polls rate-limited)
  check     `guard.check(step)` (the decision alone, without acting), for reference
  observe   `guard.observe(loss=loss, samples=16); guard.step(step)`: training health on
            (the loss a reference kept, read on the slow path), over the same bare loop
  data      `for batch in guard.data(batches): guard.observe(...); guard.step(step)`, the
            data loader's waits timed too, over a bare loop over the same iterator
Then the same with a busy process spinning on another core (started and stopped here).
Reported: extra ns per step over the bare loop of the same round, min/median/max, and that
as a fraction of a 10 ms training step. Time is this thread's CPU time
(CLOCK_THREAD_CPUTIME_ID), not the wall clock: on a shared machine the wall clock counts
the time the loop sat preempted (seen here: a bare loop's step from 26 to 900 ns). And
the rate-limited slow path (file stats, psutil, heartbeat write), amortised over 10 ms
steps at its default cadences.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stats import Row, busy_cores, interleave, record, spread

from trainguard import Guard, config_from
from trainguard.slurm.job import JobEnv
from trainguard.stopping.sensors import MAX_POLL_GAP

STEP_10MS_NS = 10_000_000


def make_guard(root: Path) -> Guard:
    config = config_from({}, checkpoint_dir=root / "ckpt", kill_switch=root / "KILL",
                         save_switch=root / "SAVE", stop_file=root / "stop-request",
                         heartbeat_dir=root / "hb", max_rss="64GiB", min_available="1MiB",
                         exit_after="10h", forced_exit=0)
    guard = Guard(config, save=lambda d: None, job=JobEnv()).start()
    guard.resume()
    return guard


def bare_loop(steps: int) -> float:
    """ns per step of the loop a user would write without the guard."""
    start = time.thread_time_ns()
    for _ in range(steps):
        pass
    return (time.thread_time_ns() - start) / steps


def guarded_loop(body: Callable[[int], object], steps: int, first: Callable[[], int]) -> float:
    """ns per step of the same loop calling `body(step)`; steps only go forward, as in a
    training (the guard's rate limits are by time and step)."""
    start_step = first()
    start = time.thread_time_ns()
    for step in range(start_step, start_step + steps):
        body(step)
    return (time.thread_time_ns() - start) / steps


def observed_loop(guard: Guard, steps: int, first: Callable[[], int]) -> float:
    """ns per step of the loop with an observation before the poll point. The loss is any
    object: the hot path keeps a reference and never reads it (a CUDA tensor is not synced)."""
    observe, poll, loss = guard.observe, guard.step, 0.25
    start_step = first()
    start = time.thread_time_ns()
    for step in range(start_step, start_step + steps):
        observe(loss=loss, samples=16)
        poll(step)
    return (time.thread_time_ns() - start) / steps


def bare_data_loop(steps: int) -> float:
    """The loop a user would write over a data loader, without the guard."""
    batches = range(steps)
    start = time.thread_time_ns()
    for _ in iter(batches):
        pass
    return (time.thread_time_ns() - start) / steps


def data_loop(guard: Guard, steps: int, first: Callable[[], int]) -> float:
    observe, poll, loss = guard.observe, guard.step, 0.25
    step = first()
    start = time.thread_time_ns()
    for _ in guard.data(range(steps)):
        observe(loss=loss, samples=16)
        poll(step)
        step += 1
    return (time.thread_time_ns() - start) / steps


def extra_ns(guard: Guard, steps: int, rounds: int) -> dict[str, list[float]]:
    """Per round: ns per step of each variant minus the bare loop's in the same round."""
    counter = iter(range(0, 10**12, steps))

    def first() -> int:
        return next(counter)
    samples = interleave({"bare": lambda: bare_loop(steps),
                          "step": lambda: guarded_loop(guard.step, steps, first),
                          "check": lambda: guarded_loop(guard.check, steps, first),
                          "observe": lambda: observed_loop(guard, steps, first),
                          "bare_data": lambda: bare_data_loop(steps),
                          "data": lambda: data_loop(guard, steps, first)}, rounds)
    pairs = {"step": "bare", "check": "bare", "observe": "bare", "data": "bare_data"}
    return {"bare": samples["bare"],
            **{name: [v - b for v, b in zip(samples[name], samples[base], strict=True)]
               for name, base in pairs.items()}}


def _median_ns(prepare: Callable[[], None], guard: Guard, repeats: int = 200) -> float:
    samples = []
    for _ in range(repeats):
        prepare()
        start = time.thread_time_ns()
        guard.gather(time.monotonic())   # the guard's clock (make_guard injects none)
        samples.append(time.thread_time_ns() - start)
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
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        guard = make_guard(Path(tmp))
        load_idle = os.getloadavg()[0]
        idle = extra_ns(guard, args.steps, args.rounds)
        with busy_cores(1):
            time.sleep(0.5)  # let the spinner reach full speed
            load_busy = os.getloadavg()[0]
            loaded = extra_ns(guard, args.steps, args.rounds)
        costs = slow_path_ns(guard)
        amortised = amortised_ns(costs, guard)
        guard.finish()
    print(f"python {sys.version.split()[0]}, {args.steps} steps x {args.rounds} rounds, interleaved; "
          f"{os.cpu_count()} CPUs")
    rows = []
    for label, runs, load in (("as found", idle, load_idle), ("+1 spinning process", loaded, load_busy)):
        bare = spread(runs["bare"])
        print(f"{label} (load average {load:.1f}): bare loop {bare.fmt(1, ' ns/step', 1)}")
        for name in ("step", "check", "observe", "data"):
            extra = spread(runs[name])
            print(f"  {name:5s} extra over bare: {extra.fmt(1, ' ns', 0)}; "
                  f"median {extra.median / STEP_10MS_NS:.1e} of a 10 ms step")
        step = spread(runs["step"])
        observed = spread(runs["observe"])
        own = spread([o - s for o, s in zip(runs["observe"], runs["step"], strict=True)])
        print(f"  observe's own cost (observe - step, same round): {own.fmt(1, ' ns', 0)}")
        rows.append(Row(f"guard `observe(loss=, samples=)` + `step()` CPU cost per step, machine {label}",
                        "< 1 µs per step, no device sync",
                        "bare `for` loop with `pass`, interleaved (and `step()` alone)",
                        f"+{observed.fmt(1, ' ns', 0)}; observe alone +{own.median:.0f} ns",
                        ".venv/bin/python benchmarks/guard_overhead.py"))
        rows.append(Row(f"guard `step()` CPU cost per step, machine {label} "
                        f"(load average {load:.1f} on {os.cpu_count()} CPUs)",
                        "< 10⁻⁴ of a 10 ms step = 1 µs (proposed)",
                        "bare `for` loop with `pass`, interleaved",
                        f"+{step.fmt(1, ' ns', 0)} = {step.median / STEP_10MS_NS:.0e} of a 10 ms step",
                        ".venv/bin/python benchmarks/guard_overhead.py"))
    print("slow path (rate-limited): " + ", ".join(f"{k} {v / 1000:.1f} us" for k, v in costs.items())
          + f"; at the default cadences = {amortised:.0f} ns per 10 ms step amortised "
          f"({amortised / STEP_10MS_NS:.1e} of the step)")
    record(__file__, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
