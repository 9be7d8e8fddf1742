"""What guarding a drop-in costs: one drop-in run (a shell script printing one line)
through DropInProcess (below the subreaper, output capped) against the same script run by
a plain subprocess.run with its output to a file (what a cron line or run-parts does).
Interleaved (A, B, A, B, ...), min/median/max wall seconds per run.

    .venv/bin/python benchmarks/dropin_guard.py [--samples 15]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from watchdogs.dropins.execute import DropInProcess


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = root / "check"
        script.write_text("#!/bin/sh\necho 'OK - fine'\n")
        script.chmod(0o700)
        guarded: list[float] = []
        plain: list[float] = []
        for n in range(args.samples):
            started = time.perf_counter()
            DropInProcess((str(script),), 60, root / f"g{n}.log", dict(os.environ), root).run()
            guarded.append(time.perf_counter() - started)
            started = time.perf_counter()
            with open(root / f"p{n}.log", "wb") as out:
                subprocess.run([str(script)], stdout=out, stderr=subprocess.STDOUT, check=False,
                               start_new_session=True)
            plain.append(time.perf_counter() - started)
    for name, values in (("guarded (DropInProcess)", guarded), ("plain subprocess.run", plain)):
        print(f"{name:<24} min {min(values):.3f}s  median {statistics.median(values):.3f}s  "
              f"max {max(values):.3f}s  (n={len(values)}, interleaved)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
