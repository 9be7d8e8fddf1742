#!/usr/bin/env python3
"""A tiny PyTorch Lightning training with trainguard: the example and the test subject.

A small MLP on synthetic data, CPU, one thread, no download, a few seconds. Run it with
the batch script template (it requeues on exit 140 and resumes from trainguard's newest
checkpoint; the last line printed is `digest <sha256 of the final weights>`):

    TRAIN_SCRIPT=slurm/examples/lightning_tiny.py sbatch slurm/train-requeue.slurm --steps 300
    TRAIN_SCRIPT=... TRAIN_LAUNCH=srun sbatch -n 2 slurm/train-requeue.slurm ...   # DDP, gloo

The trainguard part is two lines: `guard = TrainguardCallback()` before anything else, and
`trainer.fit(..., ckpt_path=guard.ckpt_path)`. The data of optimizer step N is a function
of N (and the LR schedule steps per optimizer step), so a resume in the middle of an epoch
is exact; with your own data, use a loader that saves its position (torchdata's
StatefulDataLoader), which Lightning stores in its checkpoint.
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
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds of sleep per step")
    p.add_argument("--step-log", type=Path, help="append 'step N' after every completed step")
    p.add_argument("--guard", action="append", default=[], metavar="NAME=VALUE",
                   help="a trainguard setting, e.g. save_estimate=1 (repeatable)")
    p.add_argument("--root", type=Path, default=None, help="Trainer(default_root_dir=...)")
    return p.parse_args(argv)


def guard_settings(items: list[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"--guard {item!r}: expected NAME=VALUE")
        settings[name.strip()] = value.strip()
    return settings


def world() -> tuple[int, int]:
    """(rank, world size) inside an srun step (one process per task), else (0, 1)."""
    env = os.environ
    # A real srun step only: Slurm 26.05 sets SLURM_STEP_ID=-5 in the batch script too.
    step = env.get("SLURM_STEP_ID", "")
    if step.isdigit() and int(step) < 4294967290 and "WORLD_SIZE" not in env:
        return int(env.get("SLURM_PROCID", "0")), int(env.get("SLURM_NTASKS", "1"))
    return int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1"))


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rank, size = world()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s rank{rank} %(levelname)s %(message)s")
    # First, before the seconds of `import lightning`: USR1/TERM are trainguard's from here on.
    early = Guard(config_from(**guard_settings(args.guard))).start()
    print("trainguard: guard started", file=sys.stderr, flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import lightning.pytorch as pl
        import torch

        from trainguard.integrations.lightning import TrainguardCallback
    guard = TrainguardCallback(guard=early)
    torch.set_num_threads(1)              # bit-identical reductions run to run
    torch.use_deterministic_algorithms(True)
    for noisy in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="lightning")

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            gen = torch.Generator().manual_seed(args.seed + 1)
            self.x = torch.randn(SAMPLES, FEATURES, generator=gen)
            w_true = torch.randn(FEATURES, 1, generator=gen)
            self.y = torch.sin(self.x @ w_true) + 0.05 * torch.randn(SAMPLES, 1, generator=gen)
            torch.manual_seed(args.seed)
            self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                           torch.nn.Linear(HIDDEN, 1))

        def batch_of(self, step: int) -> torch.Tensor:
            per_epoch = SAMPLES // BATCH
            epoch, k = divmod(step, per_epoch)
            order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(args.seed + 100 + epoch))
            return order[k * BATCH:(k + 1) * BATCH][rank::size]

        def training_step(self, batch: object, batch_idx: int) -> torch.Tensor:
            idx = self.batch_of(self.global_step)
            return torch.nn.functional.mse_loss(self.net(self.x[idx]), self.y[idx])

        def on_train_batch_end(self, outputs: object, batch: object, batch_idx: int) -> None:
            if args.step_log is not None and rank == 0:
                with open(args.step_log, "a") as log:
                    log.write(f"step {self.global_step - 1}\n")
            if args.step_sleep:
                time.sleep(args.step_sleep)

        def configure_optimizers(self) -> Any:   # Lightning's optimizer/scheduler dict
            optim = torch.optim.Adam(self.parameters(), lr=args.lr)
            sched = torch.optim.lr_scheduler.StepLR(optim, step_size=50, gamma=0.7)
            return {"optimizer": optim, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

        def train_dataloader(self) -> range:
            return range(SAMPLES // BATCH)    # placeholders: training_step picks the data by step

    model = Tiny()
    trainer = pl.Trainer(
        max_steps=args.steps, accelerator="cpu", devices=size, num_nodes=1,
        strategy="ddp" if size > 1 else "auto", callbacks=[guard], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=args.root)
    trainer.fit(model, ckpt_path=guard.ckpt_path)
    if trainer.global_rank == 0 or size > 1:
        digest = hashlib.sha256()
        for tensor in model.net.state_dict().values():
            digest.update(tensor.detach().contiguous().numpy().tobytes())
        print(f"final step {trainer.global_step - 1}", flush=True)
        print(f"digest {digest.hexdigest()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
