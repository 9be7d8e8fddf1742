"""What every benchmark shares: interleaved samples, min/median/max, a busy core, and one
result row per measure for the table in docs/benchmarks.md.

The convention (a new benchmarks/NAME.py follows it and `make bench` picks it up):
  * time the variants with `interleave({"ours": f, "baseline": g}, n)`: A, B, A, B, ...,
    so a drift in the machine's load hits every variant alike; n >= 5;
  * compare against what a user would pick instead (du -s, a bare loop, one squeue per
    check...), in the same run;
  * report each figure as a `Spread` (min / median / max of the samples), and call
    `record(__file__, [Row(...), ...])` once at the end: it prints the rows and writes
    benchmarks/results/NAME.json, from which `benchmarks/_table.py` rebuilds the table.
Files starting with `_` are helpers, not benchmarks.
"""
from __future__ import annotations

import json
import multiprocessing
import multiprocessing.synchronize
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

RESULTS = Path(os.environ.get("WATCHDOGS_BENCH_RESULTS", Path(__file__).parent / "results"))
MIN_SAMPLES = 5


@dataclass(frozen=True)
class Spread:
    min: float
    median: float
    max: float
    n: int

    def fmt(self, scale: float = 1.0, unit: str = "", digits: int = 2) -> str:
        """'median (min-max, n=N)' with the values multiplied by `scale`."""
        lo, mid, hi = (f"{v * scale:.{digits}f}" for v in (self.min, self.median, self.max))
        return f"{mid}{unit} ({lo}–{hi}, n={self.n})"


def spread(samples: list[float]) -> Spread:
    if not samples:
        raise ValueError("no samples")
    return Spread(min(samples), statistics.median(samples), max(samples), len(samples))


def ratios(numerators: list[float], denominators: list[float]) -> Spread:
    """Pairwise ratios of samples taken side by side (the i-th of each in the same round)."""
    return spread([a / b for a, b in zip(numerators, denominators, strict=True)])


def interleave(variants: Mapping[str, Callable[[], float]], n: int, warmup: int = 1,
               before_each: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """n rounds of every variant in turn; each call returns its own measured value (so a
    variant can leave its set-up out of the timing). `before_each` resets shared state
    (a cache, the controller's queue) before every sample, and is not timed."""
    if n < MIN_SAMPLES:
        raise ValueError(f"n={n}: at least {MIN_SAMPLES} samples per variant")
    for _ in range(warmup):
        for fn in variants.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(n):
        for name, fn in variants.items():
            if before_each is not None:
                before_each()
            samples[name].append(fn())
    return samples


def wall(fn: Callable[[], object]) -> Callable[[], float]:
    """A variant timed by the wall clock, in seconds."""
    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    return run


def _spin(stop: multiprocessing.synchronize.Event) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


@contextmanager
def busy_cores(count: int = 1) -> Iterator[None]:
    """`count` processes spinning on the CPU for the duration: a loaded machine."""
    stop = multiprocessing.get_context("spawn").Event()
    procs = [multiprocessing.get_context("spawn").Process(target=_spin, args=(stop,), daemon=True)
             for _ in range(count)]
    for proc in procs:
        proc.start()
    try:
        yield
    finally:
        stop.set()
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()


@dataclass(frozen=True)
class Row:
    """One line of the table in docs/benchmarks.md."""

    measure: str
    goal: str
    baseline: str
    figure: str
    command: str


def record(script: str, rows: list[Row]) -> Path:
    """Print the rows and write them to RESULTS/<script's name>.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{Path(script).stem}.json"
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    path.write_text(json.dumps({"date": stamp, "cpus": os.cpu_count(),
                                "rows": [asdict(r) for r in rows]}, indent=1) + "\n")
    for row in rows:
        print(f"| {row.measure} | {row.goal} | {row.baseline} | {row.figure} | `{row.command}` |")
    return path
