#!/usr/bin/env python3
"""The `disk` scan fallback against GNU du on a 200k-file tree, warm cache, same run.

    .venv/bin/python benchmarks/scan_du.py [--files 200000] [--root /some/dir]

Builds the tree in a temporary folder (removed at the end), checks that the scan's counts
equal du's, then times each tool REPEAT times and prints the medians and the ratios.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from watchdogs.fsprobe.bounded import probe
from watchdogs.fsprobe.scan import scan_tree

REPEAT = 5
PER_DIR = 500


def build(root: Path, files: int) -> None:
    for d in range(files // PER_DIR):
        folder = root / f"run{d // 20:03d}" / f"ckpt{d:04d}"
        folder.mkdir(parents=True)
        for f in range(PER_DIR):
            (folder / f"shard{f:04d}.bin").write_bytes(b"w" * ((d * 31 + f * 17) % 3000))
    os.link(root / "run000" / "ckpt0000" / "shard0000.bin", root / "run000" / "hardlink.bin")


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    runs, value = [], None
    fn()  # warm the cache and the code
    for _ in range(REPEAT):
        start = time.perf_counter()
        value = fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), value


def du(*args: str, root: Path) -> Callable[[], int]:
    return lambda: int(subprocess.run(["du", "-s", *args, str(root)], capture_output=True, text=True,
                                      check=True).stdout.split()[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--root", default=None, help="folder to build the tree in (default: /tmp)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="wd-scan-bench-", dir=args.root))
    try:
        start = time.perf_counter()
        build(base, args.files)
        print(f"built {args.files} files in {time.perf_counter() - start:.1f}s under {base} "
              f"({os.cpu_count()} CPUs)")
        results: dict[str, float] = {}
        values: dict[str, object] = {}
        for label, fn in (("du -s", du(root=base)), ("du -s --inodes", du("--inodes", root=base)),
                          ("du -sb", du("-b", root=base))):
            results[label], values[label] = timed(fn)
        for workers in (1, 4, 8, 16):
            label = f"scan, {workers} threads"
            results[label], values[label] = timed(lambda w=workers: scan_tree(str(base), 600, w))
        results["scan via bounded probe (child, 8)"], _ = timed(
            lambda: probe("scan", {"root": str(base), "time_limit": 600, "workers": 8}, 900, str(base)))
        scan = values["scan, 8 threads"]
        assert scan.apparent_bytes == values["du -sb"], "apparent bytes differ from du -sb"
        assert scan.inodes == values["du -s --inodes"], "inodes differ from du --inodes"
        assert scan.allocated_bytes == values["du -s"] * 1024, "allocated differs from du -s"
        print("counts agree with du: bytes (du -sb), blocks (du -s), inodes (du -s --inodes)")
        reference = results["du -s"] + results["du -s --inodes"]
        for label, seconds in results.items():
            print(f"{label:36s} median {seconds * 1000:8.1f} ms")
        best = min(v for k, v in results.items() if k.startswith("scan,"))
        print(f"ratio: best scan (bytes+blocks+inodes in one pass) / (du -s + du -s --inodes) = "
              f"{best / reference:.2f}; vs du -s alone = {best / results['du -s']:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
