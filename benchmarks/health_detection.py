#!/usr/bin/env python3
"""How late trainguard's training-health findings come, on real CPU trainings.

    .venv/bin/python benchmarks/health_detection.py [--runs 5]

NaN: slurm/train_tiny.py with its learning rate multiplied by 1e30 at step 50 (the loss is
NaN from step 51 on), ~12 ms steps; the latency is the steps (and seconds) from step 51 to
the step at which the guard read the NaN, against the alternative a user has without it:
none (the run goes on). Data loader: a loader sleeping 30 ms per batch; the latency is the
time from the start of the training loop to the finding with 1 s windows and no warm-up.
(Straggler and throughput drop need two ranks on the cluster and a cgroup: measured in
tests/trainguard/test_health_slurm.py, which prints its latency.)
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stats import Row, record, spread

REPO = Path(__file__).resolve().parents[1]
STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"


def _at(text: str, pattern: str) -> tuple[datetime, re.Match[str]]:
    found = re.search(STAMP + r" rank0 \w+ " + pattern, text)
    if found is None:
        raise SystemExit(f"not found: {pattern}\n{text[-2000:]}")
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f"), found


def run(*args: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, str(REPO / "slurm" / "train_tiny.py"), "--guard",
                               f"checkpoint_dir={tmp}/ckpt", *args], capture_output=True, text=True,
                              timeout=300)
    return done.stderr


def nan_latency() -> tuple[int, float]:
    log = run("--steps", "2000", "--lr-jump-step", "50", "--step-sleep", "0.01")
    start, _ = _at(log, r"trainguard: job ")
    found_at, match = _at(log, r"trainguard: loss nan at step (\d+)")
    step = int(match.group(2))
    per_step = (found_at - start).total_seconds() / (step + 1)
    return step - 51, (step - 51) * per_step


def data_latency() -> float:
    log = run("--steps", "400", "--data-sleep", "0.03", "--guard", "health_window=1s",
              "--guard", "health_warmup=0")
    start, _ = _at(log, r"trainguard: job ")
    found_at, _ = _at(log, r"trainguard: data loader: ")
    return (found_at - start).total_seconds()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    nans = [nan_latency() for _ in range(args.runs)]
    data = [data_latency() for _ in range(args.runs)]
    steps, seconds = spread([float(s) for s, _ in nans]), spread([t for _, t in nans])
    loader = spread(data)
    print(f"NaN: found {steps.fmt(1, ' steps', 0)} = {seconds.fmt(1, ' s', 2)} after the first NaN step")
    print(f"data loader (1 s windows): found {loader.fmt(1, ' s', 2)} after the loop started")
    record(__file__, [
        Row("NaN loss found after the first NaN step (~12 ms steps)", "within the slow path's 1 s",
            "none: without trainguard the run goes on",
            f"{steps.fmt(1, ' steps', 0)}, {seconds.fmt(1, ' s', 2)}",
            ".venv/bin/python benchmarks/health_detection.py"),
        Row("data-loader finding after the loop starts (1 s windows)", "one window",
            "none", loader.fmt(1, " s", 2), ".venv/bin/python benchmarks/health_detection.py")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
