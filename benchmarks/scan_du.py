#!/usr/bin/env python3
"""The `disk` scan fallback against `du -s` (what a user would type), interleaved.

    .venv/bin/python benchmarks/scan_du.py [--files 200000] [--rounds 5] [--root DIR]
                                           [--delayed-files 2000] [--delay-ms 0.5]

1. Local disk, warm cache: a tree of --files files is built, then in each round, in turn:
   `du -s`, the production path (the bounded probe: a child process running the scan with
   the default workers) and the same with 1 worker. The scan counts what `du -s`, `du -sb`
   and `du -s --inodes` print, in one pass (checked against them); du -s alone counts
   less, and is still the baseline. Wall time and CPU time (ours and children's) per sample;
   the ratio is taken per round (scan ÷ du of the same round).
2. A delayed filesystem (a FUSE passthrough waiting --delay-ms per metadata request, no
   kernel caching: see benchmarks/_delayfs.py) over --delayed-files files: `du -s` against
   the scan at 1, 2, 4 and 8 workers. Skipped, with the reason, where FUSE is unavailable.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stats import Row, interleave, ratios, record, spread

from watchdogs.fsprobe.bounded import probe
from watchdogs.fsprobe.scan import DEFAULT_WORKERS, scan_tree

PER_DIR = 500
CMD = ".venv/bin/python benchmarks/scan_du.py"


def build(root: Path, files: int, per_dir: int = PER_DIR) -> None:
    """Runs of 20 checkpoint folders of `per_dir` files each, and one hard link."""
    for d in range(max(1, files // per_dir)):
        folder = root / f"run{d // 20:03d}" / f"ckpt{d:04d}"
        folder.mkdir(parents=True)
        for f in range(min(per_dir, files)):
            (folder / f"shard{f:04d}.bin").write_bytes(b"w" * ((d * 31 + f * 17) % 3000))
    os.link(root / "run000" / "ckpt0000" / "shard0000.bin", root / "run000" / "hardlink.bin")


def du(root: Path, *args: str) -> int:
    out = subprocess.run(["du", "-s", *args, str(root)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def cpu_now() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def sampled(fn: Callable[[], object], cpu: list[float]) -> Callable[[], float]:
    """A variant returning its wall time and appending its CPU time (ours + children's)."""
    def run() -> float:
        c0, t0 = cpu_now(), time.perf_counter()
        fn()
        elapsed = time.perf_counter() - t0
        cpu.append(cpu_now() - c0)
        return elapsed
    return run


def check_counts(root: Path, workers: int) -> None:
    found = scan_tree(str(root), 600, workers)
    want = (du(root, "-b"), du(root, "-B1"), du(root, "--inodes"))
    got = (found.apparent_bytes, found.allocated_bytes, found.inodes)
    assert got == want, f"scan {got} != du (-sb, -s -B1, --inodes) {want}"


def local(root: Path, rounds: int) -> Row:
    check_counts(root, DEFAULT_WORKERS)
    cpu: dict[str, list[float]] = {"du": [], "scan": [], "scan1": []}
    default = {"root": str(root), "time_limit": 600, "workers": DEFAULT_WORKERS}
    walls = interleave({
        "du": sampled(lambda: du(root), cpu["du"]),
        "scan": sampled(lambda: probe("scan", default, 900, str(root)), cpu["scan"]),
        "scan1": sampled(lambda: probe("scan", {**default, "workers": 1}, 900, str(root)), cpu["scan1"]),
    }, rounds)
    for name in walls:
        cpu[name] = cpu[name][-rounds:]  # the warm-up's sample is not one
        print(f"{name:6s} wall {spread(walls[name]).fmt(1000, ' ms', 0)}   "
              f"CPU {spread(cpu[name]).fmt(1000, ' ms', 0)}")
    wall_ratio, cpu_ratio = ratios(walls["scan"], walls["du"]), ratios(cpu["scan"], cpu["du"])
    one = ratios(walls["scan1"], walls["du"])
    print(f"scan ({DEFAULT_WORKERS} workers, via the probe) ÷ du -s: wall {wall_ratio.fmt(1, '×')}, "
          f"CPU {cpu_ratio.fmt(1, '×')}; 1 worker: wall {one.fmt(1, '×')}")
    files = du(root, "--inodes")
    return Row(f"disk scan ÷ `du -s`, {files:,} inodes, local disk, warm cache (production path: "
               f"probe child, {DEFAULT_WORKERS} workers; counts = du -sb, du -s, du --inodes)",
               "< 1×", "`du -s`, interleaved",
               f"wall {wall_ratio.fmt(1, '×')}; CPU {cpu_ratio.fmt(1, '×')}; 1 worker: wall "
               f"{one.fmt(1, '×')}", CMD)


def delayed(tree: Path, mount: Path, rounds: int, delay_ms: float) -> Row | None:
    from _delayfs import delayed_mount

    from tests.checks.hung_mount import fuse_available
    reason = fuse_available()
    try:
        import mfusepy  # type: ignore[import-untyped]  # noqa: F401  # only: can it be built here?
    except (ImportError, OSError) as exc:
        reason = reason or f"mfusepy/libfuse3 not installed ({exc})"
    if reason:
        print(f"delayed filesystem skipped: {reason}")
        return None
    with delayed_mount(tree, mount, delay_ms / 1000) as root:
        check_counts(root, 4)
        variants: dict[str, Callable[[], object]] = {"du": lambda: du(root)}
        for w in (1, 2, 4, 8):
            variants[f"{w}"] = lambda w=w: scan_tree(str(root), 600, w)  # type: ignore[misc]  # w bound per loop
        walls = interleave({k: _wall(v) for k, v in variants.items()}, rounds, warmup=0)
    files = du(tree, "--inodes")
    parts = []
    for name, samples in walls.items():
        print(f"delayed {name:3s} wall {spread(samples).fmt(1, ' s')}")
        if name != "du":
            parts.append(f"{name}: {ratios(samples, walls['du']).fmt(1, '×')}")
    return Row(f"disk scan ÷ `du -s` on a delayed filesystem (FUSE, {delay_ms:g} ms per request, "
               f"no caching, {files:,} inodes) at 1, 2, 4, 8 workers",
               "more workers, less time", "`du -s`, interleaved", "; ".join(parts),
               f"{CMD} (needs root, /dev/fuse, libfuse3-3)")


def _wall(fn: Callable[[], object]) -> Callable[[], float]:
    return sampled(fn, [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--root", default=None, help="folder to build the trees in (default: /tmp)")
    parser.add_argument("--delayed-files", type=int, default=2000,
                        help="0: the local disk only (printed, not recorded: the table keeps both rows)")
    parser.add_argument("--delay-ms", type=float, default=0.5)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="wd-scan-bench-", dir=args.root))
    try:
        start = time.perf_counter()
        build(base / "local", args.files)
        print(f"built {args.files} files in {time.perf_counter() - start:.1f}s under {base} "
              f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
        rows = [local(base / "local", args.rounds)]
        if args.delayed_files <= 0:
            return 0
        build(base / "remote", args.delayed_files, per_dir=25)
        row = delayed(base / "remote", base / "mnt", args.rounds, args.delay_ms)
        rows += [row] if row else []
        record(__file__, rows)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
