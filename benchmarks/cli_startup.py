#!/usr/bin/env python3
"""CLI start-up: `watchdogs --help`, `status` and `validate` against a bare `python -c pass`,
interleaved (pass, help, status, validate, pass, ...), wall time of the whole process.

The config is watchdogs.example.toml with its state folder in a temporary directory (status
reads an empty state database and asks Slurm once: set SLURM_CONF to include that call, as a
user's status does). `--baseline-python` times the same commands run by another checkout's
interpreter (e.g. /work/main/.venv/bin/python) in the same interleaved run.

    .venv/bin/python benchmarks/cli_startup.py --samples 10
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import Row, record, spread

EXAMPLE = Path(__file__).resolve().parent.parent / "watchdogs.example.toml"


def config_in(folder: Path) -> Path:
    text = EXAMPLE.read_text().replace('state_dir = "watchdogs-state"', f'state_dir = "{folder / "state"}"')
    path = folder / "watchdogs.toml"
    path.write_text(text)
    return path


def once(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Run from `cwd` (not this checkout: `python -m` would import the package beside it),
    with bytecode cached as after `pip install` (PYTHONDONTWRITEBYTECODE would make every
    start compile every module; the caches go to `cwd`, not into the checkouts)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cwd / "pycache")
    start, cpu = time.perf_counter(), _children_cpu()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=cwd, env=env)
    return time.perf_counter() - start, _children_cpu() - cpu


def _children_cpu() -> float:
    """CPU seconds of finished children (the command and what it ran, e.g. squeue): less
    sensitive than wall time to a machine shared with other work."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--baseline-python", help="another checkout's interpreter, timed alongside")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = str(config_in(Path(tmp)))
        pythons = {"": sys.executable}
        if args.baseline_python:
            pythons[" (baseline)"] = args.baseline_python
        variants = {"python -c pass": [sys.executable, "-c", "pass"]}
        for label, python in pythons.items():
            variants[f"watchdogs --help{label}"] = [python, "-m", "watchdogs", "--help"]
            variants[f"watchdogs status{label}"] = [python, "-m", "watchdogs", "-c", cfg, "status"]
            variants[f"watchdogs validate{label}"] = [python, "-m", "watchdogs", "-c", cfg, "validate"]
        for argv in variants.values():  # write the bytecode caches, warm the state database
            once(argv, Path(tmp))
        times: dict[str, list[float]] = {name: [] for name in variants}
        cpus: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.samples):
            for name, argv in variants.items():
                took, cpu = once(argv, Path(tmp))
                times[name].append(took)
                cpus[name].append(cpu)
    print(f"ms, min / median / max of {args.samples}, interleaved: wall | CPU")
    for name, found in times.items():
        ms, cms = sorted(t * 1000 for t in found), sorted(t * 1000 for t in cpus[name])
        print(f"  {name:32s} {ms[0]:6.1f} / {statistics.median(ms):6.1f} / {ms[-1]:6.1f} | "
              f"{cms[0]:6.1f} / {statistics.median(cms):6.1f} / {cms[-1]:6.1f}")

    def both(name: str) -> str:
        return f"wall {spread(times[name]).fmt(1000, ' ms', 0)}, CPU {spread(cpus[name]).fmt(1000, ' ms', 0)}"
    rows = []
    for command, goal in (("--help", "≤ 100 ms"), ("status", "≤ 150 ms"), ("validate", "")):
        figure = f"{both(f'watchdogs {command}')}; python -c pass: {both('python -c pass')}"
        if f"watchdogs {command} (baseline)" in times:
            figure += f"; before: {both(f'watchdogs {command} (baseline)')}"
        rows.append(Row(f"`watchdogs {command}` start-up, example config, bytecode cached", goal,
                        "`python -c pass` (and the previous revision), interleaved", figure,
                        ".venv/bin/python benchmarks/cli_startup.py --baseline-python OLD/.venv/bin/python"))
    record(__file__, rows)


if __name__ == "__main__":
    main()
