#!/usr/bin/env python3
"""Cost of accelerate_guard in an `accelerate` training loop (CPU, a small MLP).

    .venv/bin/python benchmarks/integration_accelerate.py [--steps 300] [--repeats 7]

Compares, in the same process, interleaved (bare, guard, bare, guard, ...):
  bare    an Accelerator loop (forward, accelerator.backward, optimizer and scheduler step)
  guard   the same loop with `guard.step(step)` after each step (switch files, heartbeat on)
and reports min/median/max steps/s of each, the median difference per step and that
difference as a share of a 10 ms step; and, measured alone (the end-to-end difference is
within the noise of a CPU step), `guard.step` per call.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
try:
    import accelerate  # type: ignore[import-untyped]  # noqa: F401 - no types; only to say what is missing
except ImportError:
    sys.exit("integration benchmark skipped: accelerate is not installed "
             "(pip install 'slurm-watchdogs[accelerate]')")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torch
    from accelerate import Accelerator  # type: ignore[import-untyped]  # ships no type information
from _stats import Row, record, spread

from trainguard import Guard, config_from
from trainguard.integrations.accelerate import accelerate_guard

STEP_10MS_S = 0.010
FEATURES, HIDDEN, BATCH = 64, 512, 128


def make_guard(accelerator: Any, root: Path) -> Guard:
    guard = accelerate_guard(accelerator, config_from(
        checkpoint_dir=root / "ckpt", kill_switch=root / "KILL", save_switch=root / "SAVE",
        heartbeat_dir=root / "hb", forced_exit=0, fast_exit=False))
    guard.resume()
    return guard


def one_run(accelerator: Any, parts: tuple[Any, ...], steps: int, guard: Guard | None) -> float:
    """Seconds per step of the loop."""
    model, optim, sched, x, y = parts
    start = time.perf_counter()
    for step in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optim.zero_grad()
        accelerator.backward(loss)
        optim.step()
        sched.step()
        if guard is not None:
            guard.step(step)
    return (time.perf_counter() - start) / steps


def describe(values: list[float]) -> str:
    return f"min {min(values):7.1f}  median {statistics.median(values):7.1f}  max {max(values):7.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, 1))
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(optim, step_size=100, gamma=0.9)
    model, optim, sched = accelerator.prepare(model, optim, sched)
    parts = (model, optim, sched, torch.randn(BATCH, FEATURES), torch.randn(BATCH, 1))
    per_step: dict[str, list[float]] = {"bare": [], "guard": []}
    with tempfile.TemporaryDirectory() as tmp:
        guard = make_guard(accelerator, Path(tmp))
        one_run(accelerator, parts, 20, None)             # warm-up
        for _ in range(args.repeats):                     # interleaved: drifts hit both alike
            for name in per_step:
                per_step[name].append(one_run(accelerator, parts, args.steps,
                                              guard if name == "guard" else None))
        calls = []
        for _ in range(5):
            start = time.perf_counter()
            for step in range(args.calls):
                guard.step(step)
            calls.append((time.perf_counter() - start) / args.calls)
        guard.finish()
    print(f"accelerate loop, MLP {FEATURES}-{HIDDEN}-{HIDDEN}-1, batch {BATCH}, CPU, 1 thread, "
          f"{args.steps} steps x {args.repeats} runs, interleaved")
    for name, values in per_step.items():
        print(f"  {name:6s} steps/s  {describe([1 / v for v in values])}   "
              f"(ms/step median {statistics.median(values) * 1e3:.2f})")
    base = statistics.median(per_step["bare"])
    diff = statistics.median(per_step["guard"]) - base
    print(f"  end to end: {diff * 1e6:+.1f} us/step = {diff / base:+.2%} of this step "
          f"(noise of a CPU step: the spread above)")
    call = statistics.median(calls)
    print(f"  guard.step alone: {call * 1e6:.2f} us/call = {call / STEP_10MS_S:.4%} of a 10 ms step "
          "(goal <= 1 %)")
    steps_per_s = {name: spread([1 / v for v in values]) for name, values in per_step.items()}
    record(__file__, [Row(
        f"accelerate loop `guard.step` cost per step (MLP {FEATURES}-{HIDDEN}-{HIDDEN}-1, CPU; "
        "switches and heartbeat on)",
        "≤ 1 % of a 10 ms step (100 µs)", "the same loop without the guard, interleaved",
        f"guard.step alone {spread(calls).fmt(1e6, ' µs')} = {call / STEP_10MS_S:.3%} of 10 ms; "
        f"end to end {steps_per_s['guard'].fmt(unit=' steps/s', digits=1)} vs "
        f"{steps_per_s['bare'].fmt(unit=' steps/s', digits=1)} (noise)",
        f".venv/bin/python benchmarks/integration_accelerate.py --steps {args.steps} "
        f"--repeats {args.repeats}")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
