"""What the scrontab home costs on the dev cluster, from Slurm's own accounting: it installs
`watchdogs start --home scrontab` for a throwaway site (one drop-in, a log channel), lets
Slurm's cron run it for --minutes, removes it, and reads every run of the cron job from
`sacct --duplicates` (a scrontab job keeps one id and is requeued each minute):

  regularity  start to start, seconds (60 is on time);
  per run     elapsed seconds, CPU seconds (TotalCPU), peak RSS of the batch step;
  per day     billed core-hours (elapsed x allocated CPUs x 1440 runs) and used core-hours
              (TotalCPU x 1440), against the chain's 24 billed core-hours for one CPU.

Needs a release with the scrontab client (24.11, 26.05) and the cluster's environment:

    eval "$(slurm/dev-cluster env)"; .venv/bin/python benchmarks/home_cost.py [--minutes 4]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _seconds(text: str) -> float:
    """sacct's [DD-][HH:]MM:SS(.fff) -> seconds."""
    days, _, rest = text.rpartition("-")
    parts = [float(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return (float(days) if days else 0.0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def _rss_mb(text: str) -> float:
    if not text:
        return 0.0
    scale = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}.get(text[-1], 1 / 1024 / 1024)
    return float(text.rstrip("KMG")) * scale


def watchdogs(config: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(config), *args],
                          capture_output=True, text=True, check=True, timeout=120).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="home-cost-", dir=Path.home()) as tmp:
        site = Path(tmp)
        (site / "cron.d" / "cron.hourly").mkdir(parents=True, mode=0o700)
        dropin = site / "cron.d" / "cron.hourly" / "ok"
        dropin.write_text("#!/bin/sh\necho fine\n")
        dropin.chmod(0o700)
        name = f"home-cost-{int(time.time())}"
        config = site / "watchdogs.toml"
        config.write_text(f'[scheduler]\nstate_dir = "state"\njob_name = "{name}"\n[cron]\nhourly = "1m"\n'
                          '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n')
        watchdogs(config, "start", "--home", "scrontab")
        try:
            time.sleep(args.minutes * 60 + 5)  # a benchmark's window, not a test's wait
        finally:
            watchdogs(config, "stop")
        rows = subprocess.run(["sacct", "-D", "-n", "-P", f"--name={name}-scron", "-o",
                               "JobID,Start,Elapsed,TotalCPU,MaxRSS,AllocCPUS"],
                              capture_output=True, text=True, check=True).stdout.splitlines()
    runs = [r.split("|") for r in rows if r.split("|")[0].endswith(".batch")]
    starts = [datetime.fromisoformat(r[1]).timestamp() for r in runs]
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    elapsed = [_seconds(r[2]) for r in runs]
    cpu = [_seconds(r[3]) for r in runs]
    rss = [_rss_mb(r[4]) for r in runs]
    alloc = max(int(r[5] or 1) for r in runs) if runs else 1
    print(f"scrontab home, {len(runs)} runs over {args.minutes} min (Slurm {_release()})")
    if gaps:
        print(f"start to start   median {statistics.median(gaps):.1f} s, min {min(gaps):.1f}, "
              f"max {max(gaps):.1f}")
    if runs:
        print(f"per run          elapsed median {statistics.median(elapsed):.1f} s, CPU median "
              f"{statistics.median(cpu):.2f} s, peak RSS {max(rss):.0f} MB")
        billed = statistics.mean(elapsed) * alloc * 1440 / 3600
        used = statistics.mean(cpu) * 1440 / 3600
        print(f"per day          billed {billed:.2f} core-h (chain: 24.00), used {used:.2f} core-h")


def _release() -> str:
    return subprocess.run(["sinfo", "-V"], capture_output=True, text=True, check=False).stdout.strip()


if __name__ == "__main__":
    main()
