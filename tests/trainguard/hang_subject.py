#!/usr/bin/env python3
"""A training without torch (it starts in a fraction of a second) for the hang tests.

    python hang_subject.py --steps 200 --step-sleep 0.01 --hang-at 50 --hang-in read:/mnt/x/f \
        --guard checkpoint_dir=ckpt --guard hang_floor=2

Each step sleeps `--step-sleep`; `--save-every N` saves a checkpoint (sleeping
`--save-sleep` inside the save), `--eval-every N` runs an eval phase of `--eval-sleep` s.
`--hang-at N` hangs at step N in `--hang-in`: `sleep` (time.sleep), or `read:PATH` (a
plain read() of PATH, e.g. on a never-answering FUSE mount). Prints "done N" at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from pathlib import Path

from trainguard import Guard, config_from


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step-sleep", type=float, default=0.01)
    p.add_argument("--save-every", type=int, default=0)
    p.add_argument("--save-sleep", type=float, default=0.0)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--eval-sleep", type=float, default=0.0)
    p.add_argument("--hang-at", type=int, default=-1)
    p.add_argument("--hang-in", default="sleep")
    p.add_argument("--no-finish", action="store_true", help="end without guard.finish()")
    p.add_argument("--guard", action="append", default=[], metavar="NAME=VALUE")
    return p.parse_args(argv)


def read_shard(path: str) -> bytes:
    """A plain read, as a data loader does: on a hung mount it never returns."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def hang(how: str) -> None:
    if how.startswith("read:"):
        read_shard(how.split(":", 1)[1])
    time.sleep(10**6)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    settings = dict(item.split("=", 1) for item in args.guard)
    state = {"step": -1}

    def save(directory: Path) -> None:
        time.sleep(args.save_sleep)
        (directory / "state.txt").write_text(str(state["step"]))

    def load(directory: Path) -> None:
        state["step"] = int((directory / "state.txt").read_text())

    guard = Guard(config_from(**settings), save=save, load=load).start()
    step = -1
    # --no-finish: the loop ends without the guard's context or finish(), as a script that
    # forgot them would; the watchdog's thread must not keep the process alive.
    with contextlib.nullcontext() if args.no_finish else guard:
        for step in range(guard.resume(), args.steps):
            if step == args.hang_at:
                hang(args.hang_in)
            time.sleep(args.step_sleep)
            state["step"] = step
            if args.save_every and (step + 1) % args.save_every == 0:
                guard.save(step)
            if args.eval_every and (step + 1) % args.eval_every == 0:
                with guard.phase("eval"):
                    time.sleep(args.eval_sleep)
            guard.step(step)
        if not args.no_finish:
            guard.finish(step)
    print(f"done {step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
