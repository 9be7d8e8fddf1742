#!/usr/bin/env python3
"""Time from the warning signal to the process's exit, after the save.

    .venv/bin/python benchmarks/guard_signal_exit.py [--runs 7] [--params 4000000]

A child process (torch imported, a model of --params float32 parameters, 10 ms steps:
a small matmul and a sleep) runs under the guard; the parent sends SIGUSR1 at a random
point of a step and measures when the process is gone. The child reports, on the same
CLOCK_MONOTONIC, when its poll point saw the signal and how long the save took. The
target: signal -> exit <= one step + the save + 50 ms. For comparison, in the same run:
the same child without the guard, where SIGUSR1's default action kills it at once and
saves nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainguard import Guard, config_from  # noqa: E402 - after the path set-up above
from trainguard.slurm import JobEnv  # noqa: E402 - after the path set-up above

STEP_S = 0.010


def emit(event: str, **values: float) -> None:
    print(json.dumps({"event": event, "t": time.monotonic(), **values}), flush=True)


def child(params: int, ckpt: Path, guarded: bool) -> int:
    guard = Guard(config_from({}, checkpoint_dir=ckpt), job=JobEnv(),
                  save=lambda d: torch.save(model.state_dict(), d / "model.pt"))
    if guarded:
        guard.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
    torch.set_num_threads(1)
    model = torch.nn.Linear(params // 1000, 1000, bias=False)
    x = torch.randn(8, 64)
    if guarded:
        guard.resume()
    emit("ready")
    for step in range(10**9):
        time.sleep(STEP_S)
        x @ x.T                                       # a little compute
        if not guarded:
            continue
        decision = guard.check(step)
        if decision is not None:
            emit("decision")
            try:
                guard.act(decision, step)
            finally:
                emit("exiting", save=guard.save_time)
    return 0


def run_once(params: int, guarded: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TRAINGUARD_"))}
        proc = subprocess.Popen([sys.executable, __file__, "--child", str(params), tmp,
                                 "1" if guarded else "0"], stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        events = {}
        line = proc.stdout.readline()
        events["ready"] = json.loads(line)["t"]
        time.sleep(0.5 + random.random() * STEP_S)    # somewhere inside a step
        sent = time.monotonic()
        proc.send_signal(signal.SIGUSR1)
        proc.wait()
        gone = time.monotonic()
        for line in proc.stdout:
            record = json.loads(line)
            events[record["event"]] = record["t"]
            events.update({k: v for k, v in record.items() if k not in ("event", "t")})
        saved = (Path(tmp) / "latest").exists()
    result = {"total": gone - sent, "code": float(proc.returncode), "saved": float(saved)}
    if guarded:
        result.update(to_poll=events["decision"] - sent, save=events["save"],
                      after_save=gone - events["decision"] - events["save"],
                      teardown=gone - events["exiting"])
    return result


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--params", type=int, default=4_000_000)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(int(args.child[0]), Path(args.child[1]), args.child[2] == "1")
    guarded = [run_once(args.params, True) for _ in range(args.runs)]
    bare = [run_once(args.params, False) for _ in range(args.runs)]
    assert all(r["code"] == 140 and r["saved"] for r in guarded), guarded
    assert all(r["code"] == -signal.SIGUSR1 and not r["saved"] for r in bare), bare
    print(f"{args.runs} runs, {args.params * 4 / 2**20:.0f} MiB model, {STEP_S * 1000:.0f} ms steps; "
          "median milliseconds")
    print("guarded: signal -> poll point " + ms([r["to_poll"] for r in guarded])
          + " | save " + ms([r["save"] for r in guarded])
          + " | after the save -> exit " + ms([r["after_save"] for r in guarded])
          + " (of which interpreter teardown " + ms([r["teardown"] for r in guarded]) + ")"
          + " | total " + ms([r["total"] for r in guarded]) + " (exit 140, saved)")
    print("no guard: signal -> dead " + ms([r["total"] for r in bare])
          + " (killed by SIGUSR1, nothing saved)")
    over = [r["total"] - STEP_S - r["save"] for r in guarded]
    print(f"signal -> exit minus (one step + save): median {statistics.median(over) * 1000:.1f} ms, "
          f"max {max(over) * 1000:.1f} ms (target < 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
