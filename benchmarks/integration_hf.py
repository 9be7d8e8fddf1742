#!/usr/bin/env python3
"""Cost of TrainguardCallback in a Hugging Face Trainer run (CPU, a tiny GPT-2).

    .venv/bin/python benchmarks/integration_hf.py [--steps 150] [--repeats 7]

Compares, in the same process, interleaved (bare, callback, bare, callback, ...):
  bare      Trainer.train() for --steps steps, no trainguard
  callback  the same with callbacks=[TrainguardCallback()] (switch files, heartbeat on)
timing the training loop only (on_train_begin -> on_train_end), and reports min/median/max
steps/s of each, the median difference per step, that difference as a share of a 10 ms
step; and, measured alone (the end-to-end difference is within the noise of a CPU step),
the callback's own on_step_end per call.
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
    import transformers
except ImportError:
    sys.exit("integration benchmark skipped: transformers is not installed "
             "(pip install 'slurm-watchdogs[hf]')")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torch
    import transformers
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        Trainer,
        TrainerCallback,
        TrainerControl,
        TrainerState,
        TrainingArguments,
    )
from _stats import Row, record, spread

from trainguard import config_from
from trainguard.integrations.hf import TrainguardCallback

STEP_10MS_S = 0.010
SEQ, VOCAB = 16, 64


class Tokens(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.ids = torch.randint(0, VOCAB, (1024, SEQ), generator=torch.Generator().manual_seed(1))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class LoopTimer(TrainerCallback):
    def __init__(self) -> None:
        self.seconds = 0.0

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        self.seconds = time.perf_counter()

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        self.seconds = time.perf_counter() - self.seconds


def settings(root: Path) -> dict[str, Any]:
    return {"kill_switch": root / "KILL", "save_switch": root / "SAVE", "heartbeat_dir": root / "hb",
            "forced_exit": 0, "fast_exit": False}


def one_run(root: Path, steps: int, guarded: bool) -> float:
    """Seconds per step of the training loop."""
    args = TrainingArguments(output_dir=str(root / "out"), max_steps=steps, per_device_train_batch_size=8,
                             save_strategy="no", logging_strategy="no", report_to="none",
                             disable_tqdm=True, use_cpu=True, dataloader_num_workers=0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=SEQ, vocab_size=VOCAB))
    timer = LoopTimer()
    callbacks: list[TrainerCallback] = [timer]
    guard = TrainguardCallback(config_from(**settings(root))) if guarded else None
    if guard is not None:
        callbacks.append(guard)
    Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=callbacks).train()
    return timer.seconds / steps


def callback_call_seconds(root: Path, calls: int) -> float:
    """on_step_end of the callback alone, per call (a real TrainerState and TrainerControl)."""
    guard = TrainguardCallback(config_from(**settings(root)))
    args = TrainingArguments(output_dir=str(root / "out"), report_to="none", use_cpu=True)
    state, control = TrainerState(), TrainerControl()
    guard.on_init_end(args, state, control)
    guard.on_train_begin(args, state, control)
    start = time.perf_counter()
    for step in range(1, calls + 1):
        state.global_step = step
        guard.on_step_end(args, state, control)
    elapsed = time.perf_counter() - start
    guard.on_train_end(args, state, control)
    return elapsed / calls


def describe(values: list[float]) -> str:
    return f"min {min(values):7.1f}  median {statistics.median(values):7.1f}  max {max(values):7.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    per_step: dict[str, list[float]] = {"bare": [], "callback": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        one_run(root, 20, False)                          # warm-up: imports, allocator
        for _ in range(args.repeats):                     # interleaved: drifts hit both alike
            for name in per_step:
                per_step[name].append(one_run(root, args.steps, name == "callback"))
        calls = [callback_call_seconds(root, args.calls) for _ in range(5)]
        call = statistics.median(calls)
    print(f"HF Trainer, tiny GPT-2, CPU, 1 thread, {args.steps} steps x {args.repeats} runs, interleaved")
    for name, values in per_step.items():
        print(f"  {name:9s} steps/s  {describe([1 / v for v in values])}   "
              f"(ms/step median {statistics.median(values) * 1e3:.2f})")
    diff = statistics.median(per_step["callback"]) - statistics.median(per_step["bare"])
    base = statistics.median(per_step["bare"])
    print(f"  end to end: {diff * 1e6:+.1f} us/step = {diff / base:+.2%} of this step "
          f"(noise of a CPU step: the spread above)")
    print(f"  the callback's on_step_end alone: {call * 1e6:.2f} us/call = "
          f"{call / STEP_10MS_S:.4%} of a 10 ms step (goal <= 1 %)")
    steps_per_s = {name: spread([1 / v for v in values]) for name, values in per_step.items()}
    record(__file__, [Row(
        "HF Trainer `TrainguardCallback` cost per step (1-layer GPT-2, CPU; switches and heartbeat on)",
        "≤ 1 % of a 10 ms step (100 µs)", "`Trainer.train` without the callback, interleaved",
        f"on_step_end alone {spread(calls).fmt(1e6, ' µs')} = {call / STEP_10MS_S:.3%} of 10 ms; "
        f"end to end {steps_per_s['callback'].fmt(unit=' steps/s', digits=1)} vs "
        f"{steps_per_s['bare'].fmt(unit=' steps/s', digits=1)} (noise)",
        f".venv/bin/python benchmarks/integration_hf.py --steps {args.steps} --repeats {args.repeats}")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
