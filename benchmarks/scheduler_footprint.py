"""The scheduler's own footprint with 50 drop-ins and 20 built-in checks.

Measures, for the resident scheduler (`watchdogs run`, the process the Slurm job runs):
  - resident memory (RSS) once every item has run,
  - CPU seconds per hour while idle (nothing due; heartbeat, cron.d rescans and the
    stop-flag poll only),
  - time from an item's due time to its start (all 70 items due together every few
    seconds), from the run records in the state database,
and, in the same run, the alternative without a resident process: a pulse that starts
`watchdogs run --once --due` every tick (what a cron job or `sbatch --begin` pulse does):
its peak RSS, CPU per pulse (hence per hour at the same tick), and its due-to-start time.

    .venv/bin/python benchmarks/scheduler_footprint.py [--idle 60] [--busy 30] [--tick 10]
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

DROPINS = 50
CHECKS = 20


def make_site(root: Path, period: str, tick: str) -> Path:
    for sub in ("cron.d", "cron.d/cron.hourly", "cron.d/cron.daily", "cron.d/cron.weekly", "data"):
        (root / sub).mkdir(parents=True, mode=0o700, exist_ok=True)
    for n in range(DROPINS):
        path = root / "cron.d" / "cron.hourly" / f"dropin-{n:02d}"
        path.write_text(f"#!/bin/sh\necho 'OK - drop-in {n} | n={n}'\n")
        path.chmod(0o700)
    checks = "".join(f'[[check]]\nname = "disk-{n:02d}"\ntype = "disk"\npath = "data"\nevery = "{period}"\n'
                     for n in range(CHECKS))
    config = root / "watchdogs.toml"
    config.write_text(f'[scheduler]\nstate_dir = "state"\ntick = "{tick}"\n[cron]\nhourly = "{period}"\n'
                      + checks)
    return config


def watchdogs(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "watchdogs", "--config", str(config), *args]


def runs(config: Path) -> list[tuple[float, float]]:
    db = sqlite3.connect(config.parent / "state" / "state.sqlite3")
    try:
        return db.execute("SELECT due, started FROM sched_runs WHERE status IS NOT NULL").fetchall()
    finally:
        db.close()


def wait_runs(config: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (config.parent / "state" / "state.sqlite3").exists() and len(runs(config)) >= count:
            return
        time.sleep(0.2)
    raise SystemExit(f"only {len(runs(config))} of {count} runs within {timeout}s")


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def resident(tmp: Path, idle_s: float, tick: str) -> dict[str, float]:
    config = make_site(tmp / "idle", "1h", tick)
    proc = subprocess.Popen(watchdogs(config, "run"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ps = psutil.Process(proc.pid)
    try:
        wait_runs(config, DROPINS + CHECKS, 60)
        time.sleep(2)  # let the first round's threads wind down
        rss = ps.memory_info().rss
        before, t0 = cpu(ps), time.monotonic()
        time.sleep(idle_s)
        used, elapsed = cpu(ps) - before, time.monotonic() - t0
        threads = ps.num_threads()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return {"rss_mib": rss / 2**20, "cpu_s_per_hour": used / elapsed * 3600, "threads": threads}


def latency(tmp: Path, busy_s: float, tick: str) -> list[float]:
    config = make_site(tmp / "busy", "5s", tick)
    proc = subprocess.Popen(watchdogs(config, "run"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(busy_s)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return [started - due for due, started in runs(config) if due is not None]


def pulse(tmp: Path, pulses: int, tick_s: float) -> dict[str, float]:
    """The alternative: a fresh `run --once --due` every tick."""
    config = make_site(tmp / "pulse", "1h", f"{tick_s:g}s")
    subprocess.run(watchdogs(config, "run", "--once"), capture_output=True, check=False)  # all run once
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    walls = []
    for _ in range(pulses):  # nothing due: the idle cost of one pulse
        t0 = time.monotonic()
        subprocess.run(watchdogs(config, "run", "--once", "--due"), capture_output=True, check=False)
        walls.append(time.monotonic() - t0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    per_pulse = (after.ru_utime - cpu_before.ru_utime + after.ru_stime - cpu_before.ru_stime) / pulses
    # Due-to-start: an item falls due uniformly within a tick; it starts at the next pulse,
    # once the pulse process has started up (measured: its wall time with nothing due).
    startup = statistics.median(walls)
    return {"rss_mib": after.ru_maxrss / 1024, "cpu_s_per_pulse": per_pulse,
            "cpu_s_per_hour": per_pulse * 3600 / tick_s, "startup_s": startup,
            "latency_mean_s": tick_s / 2 + startup, "latency_max_s": tick_s + startup}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle CPU measurement")
    parser.add_argument("--busy", type=float, default=30.0, help="seconds with everything due every 5s")
    parser.add_argument("--tick", type=float, default=10.0, help="[scheduler] tick, and the pulse interval")
    parser.add_argument("--pulses", type=int, default=5)
    args = parser.parse_args()
    tick = f"{args.tick:g}s"
    with tempfile.TemporaryDirectory(prefix="wd-bench-") as tmp:
        res = resident(Path(tmp), args.idle, tick)
        lat = sorted(latency(Path(tmp), args.busy, tick))
        alt = pulse(Path(tmp), args.pulses, args.tick)
    q = statistics.quantiles(lat, n=100)
    print(f"scheduler footprint: {DROPINS} drop-ins + {CHECKS} built-in disk checks, tick {tick}, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"{'':34}{'resident scheduler':>20}{'pulse run --once --due':>26}")
    print(f"{'RSS (MiB)':34}{res['rss_mib']:>20.1f}{alt['rss_mib']:>26.1f}")
    print(f"{'CPU s per hour, idle':34}{res['cpu_s_per_hour']:>20.2f}{alt['cpu_s_per_hour']:>26.1f}")
    ours = f"{q[49]:.3f} / {q[94]:.3f} / {lat[-1]:.3f}"
    theirs = f"~{alt['latency_mean_s']:.1f} mean, {alt['latency_max_s']:.1f} max"
    print(f"{'due->start p50 / p95 / max (s)':34}{ours:>20}{theirs:>26}")
    print(f"(resident: {res['threads']:.0f} threads idle; {len(lat)} timed runs over {args.busy:g}s with all "
          f"70 items due every 5s. pulse: {alt['cpu_s_per_pulse']:.2f} CPU s and {alt['startup_s']:.2f}s "
          f"wall per pulse with nothing due, one pulse per {tick})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
