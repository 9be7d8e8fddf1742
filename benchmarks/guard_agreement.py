#!/usr/bin/env python3
"""Cost of the cross-rank agreement: two ranks, gloo, CPU.

    .venv/bin/python benchmarks/guard_agreement.py [--steps 20000] [--repeats 5]

Both ranks run the same empty loop, in the same run, interleaved (one bare all_reduce
loop, bare, K=1, K=10, K=100, then again; --repeats >= 5 rounds; min/median/max):
  bare        no guard
  K=1         an agreement at every step (what a naive guard does)
  K=10        a fixed agreement every 10 steps (sync_interval=0)
  K=100       a fixed agreement every 100 steps
and rank 0 reports the median extra microseconds per step over the bare loop and the
cost of one agreement (one all_reduce of a 10-int vector). The default cadence is by
time: the first agreement after `sync_every` (10) steps, then about every `sync_interval`
(1 s) whatever the step time; the last line turns the measured cost of one agreement into
the default's cost per 10 ms step.
Both ranks run on this machine (loopback): across nodes add the network latency to each
agreement, divided by K per step.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stats import Row, record, spread

from trainguard import Guard, config_from
from trainguard.causes import MASK_LEN
from trainguard.slurm.job import JobEnv

CADENCES = (1, 10, 100)
STEP_10MS_US = 10_000.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(body, first: int, steps: int, dist) -> float:
    dist.barrier()
    start = time.perf_counter_ns()
    for step in range(first, first + steps):   # steps only go forward, as in a training
        body(step)
    dist.barrier()
    return (time.perf_counter_ns() - start) / 1000 / steps


def worker(rank: int, port: int, steps: int, repeats: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
        import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    guards = {}
    for k in CADENCES:
        guard = Guard(config_from({}, sync_every=k, sync_interval=0, forced_exit=0),
                      job=JobEnv(procid=rank))
        guard.resume()
        guard.finish()        # handlers back; check() still works, which is all this measures
        guards[k] = guard
    samples: dict[str, list[float]] = {"bare": [], **{f"K={k}": [] for k in CADENCES}}
    raw = torch.zeros(MASK_LEN + 1, dtype=torch.int64)
    raw_us = []
    for repeat in range(repeats):
        raw_us.append(timed(lambda step: dist.all_reduce(raw, op=dist.ReduceOp.MAX), 0, 200, dist))
        samples["bare"].append(timed(lambda step: None, 0, steps, dist))
        for k, guard in guards.items():
            samples[f"K={k}"].append(timed(guard.check, repeat * steps, steps, dist))
    if rank == 0:
        report(samples, raw_us, steps, repeats)
    dist.destroy_process_group()


def report(samples: dict[str, list[float]], raw_us: list[float], steps: int, repeats: int) -> None:
    """Extra us per step over the bare loop of the same round; one agreement = extra x K."""
    print(f"2 ranks, gloo on loopback, {steps} steps x {repeats} interleaved rounds; us per step, "
          "median (min–max)")
    per_agreement: list[float] = []
    for name, values in samples.items():
        if name == "bare":
            print(f"bare        {spread(values).fmt(1, ' us/step')}")
            continue
        k = int(name.split("=")[1])
        extra = [v - b for v, b in zip(values, samples["bare"], strict=True)]
        per_agreement += [e * k for e in extra]
        print(f"{name:11} extra {spread(extra).fmt(1, ' us/step')}; per agreement "
              f"{spread([e * k for e in extra]).fmt(1, ' us', 0)}")
    one = spread(per_agreement)
    print(f"one bare dist.all_reduce of the same tensor, for comparison: {spread(raw_us).fmt(1, ' us', 0)}")
    steps_per_interval = 1.0 / (STEP_10MS_US / 1e6)
    per_step = [a / steps_per_interval for a in per_agreement]
    print(f"default cadence (one agreement per 1 s) at 10 ms steps: {one.median:.0f} us / "
          f"{steps_per_interval:.0f} steps = {one.median / steps_per_interval:.1f} us per step "
          f"({one.median / steps_per_interval / STEP_10MS_US:.1e} of the step)")
    record(__file__, [Row(
        "cross-rank agreement at the default cadence (1 per s), 2 ranks, gloo on loopback, 10 ms steps",
        "≤ 1 % of a step (proposed)",
        "a bare `dist.all_reduce` of the same tensor; agreeing every step (K=1)",
        f"{spread(per_step).fmt(1, ' us', 1)} per step; one agreement {one.fmt(1, ' us', 0)}; "
        f"bare all_reduce {spread(raw_us).fmt(1, ' us', 0)}",
        ".venv/bin/python benchmarks/guard_agreement.py")])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        worker(args.rank, args.port, args.steps, args.repeats)
        return 0
    import subprocess
    port = free_port()
    argv = [sys.executable, __file__, "--steps", str(args.steps), "--repeats", str(args.repeats),
            "--port", str(port), "--rank"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TRAINGUARD_"))}
    procs = [subprocess.Popen([*argv, str(rank)], env=env) for rank in (0, 1)]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
