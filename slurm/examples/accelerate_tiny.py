#!/usr/bin/env python3
"""A tiny `accelerate` training loop guarded by trainguard: the example and the test subject.

A small MLP on synthetic data, on CPU, one thread, in seconds. `accelerator.save_state` /
`load_state` checkpoint the model, optimizer, scheduler and RNG states; the data position
follows from the step number. A run interrupted any number of times ends with the same
weights as an uninterrupted one; the last line printed is `digest <sha256 of the weights>`.

    sbatch slurm/train-requeue.slurm          # with TRAIN_SCRIPT=slurm/examples/accelerate_tiny.py
    python slurm/examples/accelerate_tiny.py --steps 200 --guard checkpoint_dir=acc-run

Under torchrun (WORLD_SIZE > 1) it trains data-parallel with gloo.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from trainguard import Guard, config_from

FEATURES, HIDDEN, SAMPLES, BATCH = 16, 32, 512, 16


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds of sleep per step")
    p.add_argument("--step-log", type=Path, help="append 'step N' after every completed step")
    p.add_argument("--guard", action="append", default=[], metavar="NAME=VALUE",
                   help="a trainguard setting, e.g. checkpoint_dir=acc-run (repeatable)")
    return p.parse_args(argv)


def guard_settings(items: list[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"--guard {item!r}: expected NAME=VALUE")
        settings[name.strip()] = value.strip()
    return settings


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s rank{rank} %(levelname)s %(message)s")
    # First, before the seconds of importing torch and accelerate: USR1/TERM are trainguard's.
    early = Guard(config_from(**guard_settings(args.guard))).start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
        from accelerate import Accelerator  # type: ignore[import-untyped]  # ships no type information

        from trainguard.integrations.accelerate import accelerate_guard
    torch.set_num_threads(1)                  # one thread: bit-identical reductions run to run
    torch.use_deterministic_algorithms(True)

    accelerator = Accelerator(cpu=True)
    # Right after the Accelerator: signals and the kill switch are trainguard's from here on.
    guard = accelerate_guard(accelerator, guard=early)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randn(SAMPLES, FEATURES, generator=gen)
    y = torch.sin(x @ torch.randn(FEATURES, 1, generator=gen)) + 0.05 * torch.randn(SAMPLES, 1, generator=gen)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Dropout(0.1), nn.Linear(HIDDEN, 1))
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(optim, step_size=50, gamma=0.7)
    model, optim, sched = accelerator.prepare(model, optim, sched)
    rank, size = accelerator.process_index, accelerator.num_processes
    per_epoch = SAMPLES // BATCH

    def batch_of(step: int) -> torch.Tensor:  # the data position is a function of the step
        order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(
            args.seed + 100 + step // per_epoch))
        b = step % per_epoch
        return order[b * BATCH:(b + 1) * BATCH][rank::size]

    step = -1
    with guard:
        for step in range(guard.resume(), args.steps):   # after prepare: load_state
            idx = batch_of(step)
            model.train()
            loss = nn.functional.mse_loss(model(x[idx]), y[idx])
            optim.zero_grad()
            accelerator.backward(loss)
            optim.step()
            sched.step()
            if args.step_log is not None and rank == 0:
                with open(args.step_log, "a") as log:
                    log.write(f"step {step}\n")
            if args.step_sleep:
                time.sleep(args.step_sleep)
            guard.step(step)
        guard.finish(step)
    h = hashlib.sha256()
    for tensor in accelerator.unwrap_model(model).state_dict().values():
        h.update(tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    print(f"final step {step}", flush=True)
    print(f"digest {h.hexdigest()}", flush=True)
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
