#!/usr/bin/env python3
"""trainguard's per-step cost, this tree against another revision, in one process.

    .venv/bin/python benchmarks/guard_ab.py [--baseline main] [--steps 200000] [--repeats 15]

The baseline's `trainguard/` is taken with `git archive REV`, renamed to a package of its
own (`trainguard_base`), and both guards run the same loop, interleaved repeat by repeat
(bare, base, this, bare, base, this, ...), every feature on as in guard_overhead.py. Prints
min/median/max extra nanoseconds per step over the bare loop for `check` and `step`.
"""
from __future__ import annotations

import argparse
import importlib
import io
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from _stats import Row, record, spread  # noqa: E402 - after the path set-up above


def baseline_package(rev: str, into: Path) -> str:
    """`trainguard/` at `rev` as the package `trainguard_base` under `into`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "trainguard"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "trainguard").rename(into / "trainguard_base")
    for path in (into / "trainguard_base").rglob("*.py"):
        path.write_text(re.sub(r"\btrainguard\b(?=[.\s])", "trainguard_base", path.read_text()))
    sys.path.insert(0, str(into))
    return "trainguard_base"


def job_env(package: str) -> Any:
    """An empty JobEnv of `package`: in trainguard.slurm.job since the subpackages (b4f4225),
    in the module trainguard.slurm before, so that either revision can be the baseline."""
    slurm = importlib.import_module(f"{package}.slurm")
    if hasattr(slurm, "JobEnv"):
        return slurm.JobEnv()
    return importlib.import_module(f"{package}.slurm.job").JobEnv()


def make_guard(package: str, root: Path) -> Any:
    tg = importlib.import_module(package)
    job = job_env(package)
    config = tg.config_from({}, checkpoint_dir=root / "ckpt", kill_switch=root / "KILL",
                            save_switch=root / "SAVE", stop_file=root / "stop-request",
                            heartbeat_dir=root / "hb", max_rss="64GiB", min_available="1MiB",
                            exit_after="10h", forced_exit=0)
    guard = tg.Guard(config, save=lambda d: None, job=job).start()
    guard.resume()
    return guard


def per_step_ns(body: Callable[[int], object], steps: int) -> float:
    import time
    start = time.perf_counter_ns()
    for step in range(steps):
        body(step)
    return (time.perf_counter_ns() - start) / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_pkg = baseline_package(args.baseline, Path(tmp) / "pkg")
        guards = {"base": make_guard(base_pkg, Path(tmp) / "a"),
                  "this": make_guard("trainguard", Path(tmp) / "b")}
        bodies: dict[str, Callable[[int], object]] = {"bare": lambda step: None}
        for name, guard in guards.items():
            bodies[f"{name} check"], bodies[f"{name} step"] = guard.check, guard.step
        samples: dict[str, list[float]] = {name: [] for name in bodies}
        for _ in range(args.repeats):      # interleaved: a drift in load hits every variant alike
            for name, body in bodies.items():
                samples[name].append(per_step_ns(body, args.steps))
        assert type(guards["base"]).__module__ == f"{base_pkg}.guard"   # two distinct packages
        for guard in guards.values():
            guard.finish()
    bare = statistics.median(samples["bare"])
    print(f"python {sys.version.split()[0]}; baseline {args.baseline}; {args.steps} steps x "
          f"{args.repeats} repeats, interleaved; extra ns per step over the bare loop "
          f"(bare median {bare:.0f} ns)")
    print(f"{'variant':12} {'min':>6} {'median':>7} {'max':>6}")
    for name, values in samples.items():
        if name != "bare":
            extra = [v - bare for v in values]
            print(f"{name:12} {min(extra):6.0f} {statistics.median(extra):7.0f} {max(extra):6.0f}")
    extra_of = {name: spread([v - b for v, b in zip(samples[name], samples["bare"], strict=True)])
                for name in ("this step", "base step")}
    record(__file__, [Row(
        f"guard `step()` extra per step, this tree against {args.baseline} (every feature on)",
        "no slower than the baseline revision",
        f"`trainguard/` of {args.baseline} in the same process; bare loop; interleaved",
        f"this {extra_of['this step'].fmt(digits=0, unit=' ns')} vs {args.baseline} "
        f"{extra_of['base step'].fmt(digits=0, unit=' ns')}",
        f".venv/bin/python benchmarks/guard_ab.py --baseline {args.baseline} --repeats {args.repeats}")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
