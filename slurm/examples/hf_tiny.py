#!/usr/bin/env python3
"""A tiny Hugging Face Trainer run guarded by trainguard: the example and the test subject.

A one-layer GPT-2 built from a config (no download) on synthetic tokens, on CPU, one
thread, in seconds. The Trainer saves and resumes its own checkpoints (model, optimizer,
scheduler, RNG, data position); trainguard decides when, so a run interrupted any number
of times ends with the same weights as an uninterrupted one. The last line printed is
`digest <sha256 of the final weights>`.

    sbatch slurm/train-requeue.slurm              # with TRAIN_SCRIPT=slurm/examples/hf_tiny.py
    python slurm/examples/hf_tiny.py --steps 60 --output-dir hf-run

The checkpoints go to TRAINGUARD_CHECKPOINT_DIR (the batch script templates set it), else
--output-dir. Under torchrun (WORLD_SIZE > 1) it trains data-parallel with gloo.
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

SAMPLES, SEQ, VOCAB = 256, 16, 64


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--output-dir", type=Path, default=Path("hf-run"))
    p.add_argument("--save-every", type=int, default=0, help="the Trainer's own periodic saves")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds of sleep per step")
    p.add_argument("--step-log", type=Path, help="append 'step N' after every completed step")
    p.add_argument("--guard", action="append", default=[], metavar="NAME=VALUE",
                   help="a trainguard setting, e.g. forced_exit=5 (repeatable)")
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
    # First, before the seconds of `import transformers`: from here on SIGUSR1/SIGTERM and
    # the kill switch are trainguard's.
    guard = Guard(config_from(**guard_settings(args.guard))).start()
    output_dir = Path(os.environ.get("TRAINGUARD_CHECKPOINT_DIR") or args.output_dir)

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

        from trainguard.integrations.hf import TrainguardCallback, latest_checkpoint
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)                 # one thread: bit-identical reductions run to run
    torch.use_deterministic_algorithms(True)

    class Tokens(torch.utils.data.Dataset):  # synthetic next-token data, fixed by the seed
        def __init__(self) -> None:
            gen = torch.Generator().manual_seed(args.seed + 1)
            self.ids = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=gen)

        def __len__(self) -> int:
            return SAMPLES

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    step_log, step_sleep = args.step_log, args.step_sleep

    class StepLog(TrainerCallback):          # the test's record: every step exactly once
        def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                        **kwargs: Any) -> None:
            if step_log is not None and rank == 0:
                with open(step_log, "a") as log:
                    log.write(f"step {state.global_step - 1}\n")
            if step_sleep:
                time.sleep(step_sleep)

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    targs = TrainingArguments(
        output_dir=str(output_dir), max_steps=args.steps, per_device_train_batch_size=8,
        learning_rate=1e-3, seed=args.seed, data_seed=args.seed, dataloader_num_workers=0,
        save_strategy="steps" if args.save_every else "no", save_steps=args.save_every or 500,
        # The logged loss is what trainguard's health reads (unfiltered: a NaN must show).
        logging_strategy="steps", logging_steps=10, logging_nan_inf_filter=False, report_to="none",
        disable_tqdm=True, use_cpu=True,
        ddp_backend="gloo" if distributed else None)
    torch.manual_seed(args.seed)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=SEQ,
                                       vocab_size=VOCAB, bos_token_id=0, eos_token_id=0))
    trainer = Trainer(model=model, args=targs, train_dataset=Tokens(),
                      callbacks=[StepLog(), TrainguardCallback(guard=guard)])
    trainer.train(resume_from_checkpoint=latest_checkpoint(output_dir))

    assert trainer.model is not None
    h = hashlib.sha256()
    for tensor in trainer.model.state_dict().values():
        h.update(tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    print(f"final step {trainer.state.global_step - 1}", flush=True)
    print(f"digest {h.hexdigest()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
