#!/usr/bin/env python3
"""A tiny, deterministic training that uses trainguard: the example and the test subject.

A small MLP on synthetic data, on CPU, one thread. Model, optimizer (Adam), LR scheduler,
data position (epoch, batch) and RNG state (dropout) are saved and restored, so a run
interrupted any number of times ends with the same weights as an uninterrupted one; the
last line printed is `digest <sha256 of the final weights>`.

    python slurm/train_tiny.py --steps 200 --step-sleep 0.02 --step-log steps.txt \
        --guard checkpoint_dir=ckpt --guard kill_switch=KILL

Guard settings come from TRAINGUARD_* (the batch script templates set them) and from
`--guard name=value`. Under `srun --ntasks=N` (N > 1) it trains data-parallel with gloo.
Test hooks: `--raise-error --error-step N` raises at the start of step N; `--hang-step N`
hangs at step N (first run of the job only), like a rank stuck in a collective;
`--kill-rank R --kill-after N` makes rank R SIGKILL itself after N steps of every launch
(each in-place restart and requeue too), like a rank the kernel's OOM killer ends; with
`--kill-once`, only in the job's first launch.
Training health: every step reports its loss and batch size (`guard.observe`) and its data
comes through `guard.data(...)`; `--lr-jump-step N --lr-jump F` multiplies the learning
rate by F from step N (the loss diverges to NaN), `--data-sleep S` makes the data loader
sleep S per batch, `--burn N` adds N small matmuls of compute per step.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import NoReturn

from trainguard import END_AT_ONCE, Guard, config_from

FEATURES, HIDDEN, SAMPLES, BATCH = 16, 32, 512, 16


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds of sleep per step")
    p.add_argument("--save-every", type=int, default=0, help="periodic checkpoint every N steps")
    p.add_argument("--step-log", type=Path, help="append 'step N' after every completed step")
    p.add_argument("--guard", action="append", default=[], metavar="NAME=VALUE",
                   help="a trainguard setting, e.g. forced_exit=5 (repeatable)")
    p.add_argument("--term-final", action="store_true", help="a plain scancel saves nothing")
    p.add_argument("--raise-error", action="store_true")
    p.add_argument("--error-step", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=-1)
    # A rank dying outright (no exception, no save): a real fault for the restart-storm tests.
    # Counted per launch, so every run checkpoints a little further first (a storm by count,
    # not by lack of progress).
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-after", type=int, default=-1, help="steps of each launch before the kill")
    p.add_argument("--kill-once", action="store_true",
                   help="kill only in the job's first launch (no requeue, no in-place restart yet)")
    p.add_argument("--lr-jump-step", type=int, default=-1)
    p.add_argument("--lr-jump", type=float, default=1e30)
    p.add_argument("--data-sleep", type=float, default=0.0, help="seconds the data loader sleeps per batch")
    p.add_argument("--burn", type=int, default=0, help="extra matmuls of compute per step")
    return p.parse_args(argv)


def guard_settings(args: argparse.Namespace) -> dict[str, str]:
    settings = {}
    for item in args.guard:
        name, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"--guard {item!r}: expected NAME=VALUE")
        settings[name.strip()] = value.strip()
    return settings


def world() -> tuple[int, int]:
    """(rank, world size): torchrun's RANK/WORLD_SIZE, else srun's task id/count (inside an
    srun step only: the batch shell's SLURM_NTASKS is not the number of processes here)."""
    env = os.environ
    if "WORLD_SIZE" in env:
        return int(env.get("RANK", "0")), int(env["WORLD_SIZE"])
    if in_srun_step(env):
        return int(env.get("SLURM_PROCID", "0")), int(env.get("SLURM_NTASKS", "1"))
    return 0, 1


def in_srun_step(env) -> bool:
    """SLURM_STEP_ID names a real srun step: Slurm 26.05 also sets it in the batch script
    (-5), as some releases did for the batch/extern steps (4294967290 and up)."""
    step = env.get("SLURM_STEP_ID", "")
    return step.isdigit() and int(step) < 4294967290


def import_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # "Failed to initialize NumPy": numpy is not needed here
        import torch
    torch.set_num_threads(1)              # one thread: bit-identical reductions run to run
    torch.use_deterministic_algorithms(True)
    return torch


class Trainer:
    def __init__(self, torch, args: argparse.Namespace, rank: int, size: int) -> None:
        self.torch, self.args, self.rank, self.size = torch, args, rank, size
        torch.manual_seed(args.seed)
        gen = torch.Generator().manual_seed(args.seed + 1)
        self.x = torch.randn(SAMPLES, FEATURES, generator=gen)
        w_true = torch.randn(FEATURES, 1, generator=gen)
        self.y = torch.sin(self.x @ w_true) + 0.05 * torch.randn(SAMPLES, 1, generator=gen)
        nn = torch.nn
        self.model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Dropout(0.1),
                                   nn.Linear(HIDDEN, 1))
        self.net = self.model
        if size > 1:
            # One bucket per parameter: DDP reorders its buckets after the first step, which
            # changes the order in which 3+ ranks sum an element; per-parameter buckets keep it
            # the same before and after a resume (a resumed run stays bit-identical).
            self.net = nn.parallel.DistributedDataParallel(self.model, bucket_cap_mb_list=[1e-6])
        self.optim = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.sched = torch.optim.lr_scheduler.StepLR(self.optim, step_size=50, gamma=0.7)
        self.epoch, self.batch = 0, 0
        self.order = self._order(0)

    def _order(self, epoch: int):
        return self.torch.randperm(SAMPLES, generator=self.torch.Generator().manual_seed(
            self.args.seed + 100 + epoch))

    def batches(self):
        """The data loader: the next batch's indices, forever (slow with --data-sleep)."""
        while True:
            if self.args.data_sleep:
                time.sleep(self.args.data_sleep)
            yield self.order[self.batch * BATCH:(self.batch + 1) * BATCH][self.rank::self.size]

    def train_step(self, idx):
        self.model.train()
        out = self.net(self.x[idx])
        if self.args.burn:       # compute that a cgroup CPU quota slows down
            m = self.torch.ones(128, 128)
            for _ in range(self.args.burn):
                m = (m @ m).clamp_(-1, 1)
            out = out + 0 * m.sum()
        loss = self.torch.nn.functional.mse_loss(out, self.y[idx])
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()
        self.sched.step()
        self.batch += 1
        if self.batch * BATCH >= SAMPLES:
            self.epoch, self.batch = self.epoch + 1, 0
            self.order = self._order(self.epoch)
        return loss.detach()

    def jump_lr(self, factor: float) -> None:
        for group in self.optim.param_groups:
            group["lr"] *= factor

    def save_to(self, directory: Path) -> None:
        self.torch.save({"model": self.model.state_dict(), "optim": self.optim.state_dict(),
                         "sched": self.sched.state_dict(), "rng": self.torch.get_rng_state(),
                         "epoch": self.epoch, "batch": self.batch}, directory / "state.pt")

    def load_from(self, directory: Path) -> None:
        state = self.torch.load(directory / "state.pt", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optim.load_state_dict(state["optim"])
        self.sched.load_state_dict(state["sched"])
        self.torch.set_rng_state(state["rng"])
        self.epoch, self.batch = int(state["epoch"]), int(state["batch"])
        self.order = self._order(self.epoch)

    def digest(self) -> str:
        h = hashlib.sha256()
        for tensor in self.model.state_dict().values():
            h.update(bytes(tensor.detach().contiguous().view(-1).view(self.torch.uint8).tolist()))
        return h.hexdigest()


def init_distributed(torch, rank: int, size: int) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(20000 + int(os.environ.get("SLURM_JOB_ID", "0")) % 20000))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=size)


def main(argv: list[str]) -> NoReturn:
    args = parse_args(argv)
    rank, size = world()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s rank{rank} %(levelname)s %(message)s")
    config = config_from(**guard_settings(args))
    if args.term_final:
        config = config.with_policy({"terminate": END_AT_ONCE})
    trainer: Trainer | None = None
    guard = Guard(config, save=lambda d: trainer.save_to(d), load=lambda d: trainer.load_from(d))
    guard.start()                 # before importing torch: signals are caught from here on
    torch = import_torch()
    if size > 1:
        init_distributed(torch, rank, size)
    trainer = Trainer(torch, args, rank, size)
    first_run = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) == 0
    first_launch = first_run and os.environ.get("TRAINGUARD_INPLACE_RESTART", "0") in ("", "0")
    step = -1
    with guard:
        first = guard.resume()
        data = guard.data(trainer.batches())
        for step in range(first, args.steps):
            if args.raise_error and step == args.error_step:
                raise RuntimeError(f"injected error at step {step}")
            killed_here = first_launch or not args.kill_once
            if rank == args.kill_rank and step - first == args.kill_after and killed_here:
                os.kill(os.getpid(), signal.SIGKILL)
            if step == args.hang_step and first_run:
                time.sleep(10**6)     # a rank stuck in a collective: never reaches the poll point
            if step == args.lr_jump_step:
                trainer.jump_lr(args.lr_jump)
            idx = next(data)
            loss = trainer.train_step(idx)
            guard.observe(loss=loss, samples=len(idx))
            if args.step_log is not None and rank == 0:
                with open(args.step_log, "a") as log:
                    log.write(f"step {step}\n")
            if args.step_sleep:
                time.sleep(args.step_sleep)
            if args.save_every and (step + 1) % args.save_every == 0:
                guard.save(step)
            guard.step(step)
        guard.finish(step)
    # One write per line: the ranks of a torchrun share one stdout, and print()'s separate
    # write of the newline (unbuffered output) let two ranks' lines run into one.
    sys.stdout.write(f"final step {step}\ndigest {trainer.digest()}\n")
    sys.stdout.flush()
    # Not a plain return: under gloo, the interpreter's finalisation can abort a finished
    # rank (PyTorch's worker threads drop the last collective's tensors meanwhile). The
    # guard leaves torch.distributed and skips that finalisation.
    guard.exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
