#!/usr/bin/env python3
"""What TrainguardCallback costs a Lightning training, per step.

    .venv/bin/python benchmarks/integration_lightning.py [--steps 300] [--repeats 7]

The same small model is trained with `Trainer.fit`, in one process, alternately without
and with the callback (A, B, A, B, ...; every trainguard feature on: checkpoint dir,
kill/save switches, stop file, heartbeat, memory threshold; no save happens). Steps/s are
1 / the median interval between two batch ends (the Trainer's set-up is excluded; a
moment's load from another process does not count), for two step sizes:
  tiny    a 16x32x1 MLP on one batch: the step is Lightning's own overhead, so the
          difference is the callback's absolute cost per step (µs);
  10ms    the same plus a 10 ms sleep in training_step: the goal is <= 1 % slower.
Reports min/median/max of each variant's steps/s and CPU time per step, and the median of
the pairs' CPU-per-step differences as a share of a 10 ms step; and, measured directly, the
time spent inside the callback's per-step hook (the guard's poll), which the end-to-end
difference cannot resolve on a loaded machine.
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")
import lightning.pytorch as pl  # noqa: E402 - after the path set-up above
import torch  # noqa: E402 - after the path set-up above
from _stats import Row, record, spread  # noqa: E402 - after the path set-up

from trainguard.integrations.lightning import TrainguardCallback  # noqa: E402 - after the path set-up

torch.set_num_threads(1)
for name in ("lightning.pytorch", "lightning.fabric", "trainguard"):
    logging.getLogger(name).setLevel(logging.ERROR)


class Tiny(pl.LightningModule):
    def __init__(self, sleep: float) -> None:
        super().__init__()
        self.sleep = sleep
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        self.x, self.y = torch.randn(16, 16), torch.randn(16, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.sleep:
            time.sleep(self.sleep)
        return torch.nn.functional.mse_loss(self.net(self.x), self.y)

    def configure_optimizers(self) -> Any:   # a plain optimizer
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self) -> range:
        return range(10_000)


class Timer(pl.Callback):
    """The median interval between two batch ends: robust against another process taking
    the CPU for a moment (this machine is shared)."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.stamps: list[float] = []
        self.cpu_start = time.process_time()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        self.stamps.append(time.perf_counter())

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        gaps = [b - a for a, b in zip(self.stamps, self.stamps[1:], strict=False)]   # neighbours
        self.steps_per_s = 1 / statistics.median(gaps)
        self.cpu_per_step = (time.process_time() - self.cpu_start) / trainer.global_step


def guard_callback(root: Path) -> TrainguardCallback:
    return TrainguardCallback(checkpoint_dir=root / "ckpt", kill_switch=root / "KILL",
                              save_switch=root / "SAVE", stop_file=root / "stop-request",
                              heartbeat_dir=root / "hb", max_rss="64GiB", use_slurm_endtime=False,
                              forced_exit=0)


class TimedHook:
    """Wraps the callback's per-step hook: the time spent inside it (the guard's poll)."""

    def __init__(self, hook: Any) -> None:
        self.hook, self.total, self.calls = hook, 0.0, 0

    def __call__(self, *args: Any) -> None:
        start = time.perf_counter()
        self.hook(*args)
        self.total += time.perf_counter() - start
        self.calls += 1


INSIDE: list[float] = []   # seconds per step inside the callback's hook, one per guarded run


def one_run(steps: int, sleep: float, guarded: bool, root: Path) -> tuple[float, float]:
    """(steps/s, CPU seconds per step) of one fit."""
    timer = Timer()
    callbacks: list[pl.Callback] = [timer]
    if guarded:
        guard = guard_callback(root)
        timed = TimedHook(guard.on_train_batch_end)
        guard.__dict__["on_train_batch_end"] = timed   # instrumentation: shadows the method
        callbacks.append(guard)
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks)
    trainer.fit(Tiny(sleep))
    if guarded:
        INSIDE.append(timed.total / timed.calls)
    return timer.steps_per_s, timer.cpu_per_step


def summary(values: list[float], unit: str = "") -> str:
    return (f"min {min(values):9.1f}{unit}  median {statistics.median(values):9.1f}{unit}  "
            f"max {max(values):9.1f}{unit}")


def compare(label: str, steps: int, sleep: float, repeats: int, root: Path, command: str) -> Row:
    bare: list[tuple[float, float]] = []
    guarded: list[tuple[float, float]] = []
    one_run(min(steps, 50), sleep, True, root)            # warm-up: imports, first-call costs
    INSIDE.clear()
    for _ in range(repeats):                              # interleaved: A, B, A, B, ...
        bare.append(one_run(steps, sleep, False, root))
        guarded.append(one_run(steps, sleep, True, root))
    # CPU time, not wall time: the machine is shared, and another process's load shows in
    # the wall clock; the callback's cost is CPU work in this process.
    extra = statistics.median(g[1] - b[1] for b, g in zip(bare, guarded, strict=True))
    print(f"{label}: {steps} steps x {repeats} interleaved pairs")
    print(f"  steps/s without callback  {summary([b[0] for b in bare])}")
    print(f"  steps/s with callback     {summary([g[0] for g in guarded])}")
    print(f"  CPU/step without          {summary([b[1] * 1e6 for b in bare], ' µs')}")
    print(f"  CPU/step with             {summary([g[1] * 1e6 for g in guarded], ' µs')}")
    print(f"  callback: {extra * 1e6:+.1f} µs CPU per step (median of pair differences) "
          f"= {100 * extra / 0.010:+.3f} % of a 10 ms step")
    print(f"  inside the callback's on_train_batch_end: {summary([t * 1e6 for t in INSIDE], ' µs')} per step "
          f"= {100 * statistics.median(INSIDE) / 0.010:.4f} % of a 10 ms step")
    differences = spread([g[1] - b[1] for b, g in zip(bare, guarded, strict=True)])
    return Row(f"Lightning `TrainguardCallback` cost per step, {label}, {steps} steps (every feature on)",
               "≤ 1 % of a 10 ms step (100 µs)", "`Trainer.fit` without the callback, interleaved",
               f"inside the callback {spread(INSIDE).fmt(1e6, ' µs', 1)} = "
               f"{100 * statistics.median(INSIDE) / 0.010:.2f} % of 10 ms; end to end CPU/step "
               f"{differences.fmt(1e6, ' µs', 0)} (noise)", command)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    command = (f".venv/bin/python benchmarks/integration_lightning.py --steps {args.steps} "
               f"--repeats {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [compare("tiny step (Lightning's own overhead)", args.steps * 5, 0.0, args.repeats, Path(tmp),
                        command),
                compare("10 ms step", args.steps, 0.010, args.repeats, Path(tmp), command)]
    record(__file__, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
