#!/usr/bin/env python3
"""A preemption warning (SIGUSR1) in the middle of a training: how long to the exit, and how
many steps are lost, with the guard and without it (the training's own periodic save only).

    .venv/bin/python benchmarks/guard_signal_exit.py [--runs 7] [--params 4000000]

A child process (torch imported, a model of --params float32 parameters, 10 ms steps: a
small matmul and a sleep) saves a checkpoint every SAVE_EVERY steps, as a training does. The
parent sends SIGUSR1 at a random time (uniform over one save period, so anywhere within a
step and within the period) and measures when the process is gone. Variants, interleaved
(guarded, bare, guarded, bare, ...):
  guarded   `guard.step(step)` after every step, as the README says; on the signal it saves
            at the next poll point and exits 140
  bare      the same loop without the guard: SIGUSR1's default action kills it at once
Counted per run: lost steps = steps completed - steps in the newest checkpoint (what a
requeued job redoes), signal -> exit, and for the guard signal -> save start and the save.
The target: signal -> exit <= one step + the save + 50 ms, i.e. (signal -> exit) - save
<= 60 ms; nothing is subtracted for the part of a step the signal landed in.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stats import Row, interleave, record, spread

from trainguard import Guard, config_from
from trainguard.slurm.job import JobEnv

STEP_S = 0.010


SAVE_EVERY = 50  # steps between the training's own saves (0.5 s at 10 ms steps)


def emit(event: str, **values: float) -> None:
    print(json.dumps({"event": event, "t": time.monotonic(), **values}), flush=True)


def child(params: int, root: Path, guarded: bool) -> int:
    current = [-1]

    def save(folder: Path) -> None:
        emit("saving")
        torch.save(model.state_dict(), folder / "model.pt")
        marker = root / "saved_step.tmp"
        marker.write_text(str(current[0]))
        marker.rename(root / "saved_step")   # the step the newest checkpoint holds
        emit("saved")

    guard = Guard(config_from({}, checkpoint_dir=root / "ckpt"), job=JobEnv(), save=save)
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
    try:
        for step in range(10**9):
            time.sleep(STEP_S)
            x @ x.T                                       # a little compute
            current[0] = step
            emit("step", n=step)                          # step completed
            if step % SAVE_EVERY == SAVE_EVERY - 1:       # the training's periodic save
                if guarded:
                    guard.save(step)
                else:
                    folder = root / "ckpt" / f"step{step}"
                    folder.mkdir(parents=True)
                    save(folder)
            if guarded:
                guard.step(step)
    except SystemExit:
        emit("exiting")
        raise
    return 0


def run_once(params: int, guarded: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TRAINGUARD_"))}
        proc = subprocess.Popen([sys.executable, __file__, "--child", str(params), tmp,
                                 "1" if guarded else "0"], stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert json.loads(line)["event"] == "ready", line
        time.sleep(0.2 + random.random() * SAVE_EVERY * STEP_S)   # anywhere in a save period
        sent = time.monotonic()
        proc.send_signal(signal.SIGUSR1)
        proc.wait()
        gone = time.monotonic()
        events: dict[str, float] = {}
        for line in proc.stdout:
            record = json.loads(line)
            if record["event"] in ("saving", "saved") and record["t"] < sent:
                continue  # a periodic save before the signal
            events[record["event"]] = record.get("n", record["t"])
            events.update({k: v for k, v in record.items() if k not in ("event", "t", "n")})
        marker = Path(tmp) / "saved_step"
        saved = int(marker.read_text()) if marker.exists() else -1
    result = {"total": gone - sent, "code": float(proc.returncode),
              "lost": events["step"] - saved, "saved_at_signal": float(saved == events["step"])}
    if guarded:
        save_s = events["saved"] - events["saving"]
        result.update(to_save=events["saving"] - sent, save=save_s, minus_save=gone - sent - save_s)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--params", type=int, default=4_000_000)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(int(args.child[0]), Path(args.child[1]), args.child[2] == "1")
    runs: dict[str, list[dict[str, float]]] = {"guarded": [], "bare": []}

    def variant(name: str) -> float:
        runs[name].append(run_once(args.params, name == "guarded"))
        return runs[name][-1]["total"]
    interleave({"guarded": lambda: variant("guarded"), "bare": lambda: variant("bare")},
               args.runs, warmup=0)
    guarded, bare = runs["guarded"], runs["bare"]
    assert all(r["code"] == 140 for r in guarded), guarded
    assert all(r["code"] == -signal.SIGUSR1 for r in bare), bare

    def of(rs: list[dict[str, float]], key: str, scale: float = 1000, unit: str = " ms") -> str:
        return spread([r[key] for r in rs]).fmt(scale, unit, 0 if unit != " ms" else 1)
    print(f"{args.runs} runs each, interleaved, {args.params * 4 / 2**20:.0f} MiB model, "
          f"{STEP_S * 1000:.0f} ms steps, a save every {SAVE_EVERY} steps")
    print(f"guarded: signal -> save starts {of(guarded, 'to_save')} | save {of(guarded, 'save')} | "
          f"signal -> exit {of(guarded, 'total')} | minus the save {of(guarded, 'minus_save')}")
    print(f"         lost steps {of(guarded, 'lost', 1, '')}; saved at the signal in "
          f"{sum(r['saved_at_signal'] for r in guarded):.0f} of {len(guarded)} runs")
    print(f"bare:    signal -> dead {of(bare, 'total')}; lost steps {of(bare, 'lost', 1, '')}")
    cmd = ".venv/bin/python benchmarks/guard_signal_exit.py"
    record(__file__, [
        Row("steps lost per preemption warning (SIGUSR1 at a random point; the training saves "
            f"every {SAVE_EVERY} steps of 10 ms)", "0", "no guard: killed by the signal",
            f"guard {of(guarded, 'lost', 1, '')}; no guard {of(bare, 'lost', 1, '')}", cmd),
        Row(f"signal → exit minus the save ({args.params * 4 / 2**20:.0f} MiB model, 10 ms steps)",
            "≤ one step + 50 ms = 60 ms", "no guard: signal → dead, nothing saved",
            f"{of(guarded, 'minus_save')} (save {of(guarded, 'save')}); no guard: dead after "
            f"{of(bare, 'total')}", cmd)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
