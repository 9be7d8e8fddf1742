"""The scheduler's own footprint with 50 drop-ins and 20 built-in checks, against the
alternative without a resident process, on the same work, measured the same way.

Both variants run the same site: 50 drop-ins and 20 `disk` checks, each every --period
seconds (so work happens during the window: nothing is "idle"):
  resident  `watchdogs run` (the process the Slurm job runs), started, its first round
            left to finish, then measured for --window seconds;
  pulse     `watchdogs run --once --due` started every --tick seconds (what a cron job or
            an `sbatch --begin` pulse does), after one unmeasured `--once` so every item
            starts the window on time; measured for --window seconds.
Rounds alternate (resident, pulse, resident, ...). Measured per round: CPU seconds per
hour (the process and its children: drop-ins, probes), peak RSS (sampled every 20 ms for
the pulses), and lateness: for each run in the window, the time between its start and
the previous run's start of the same item, minus the period (0 = on time), from the run
records in the state database; and CPU per item run, since a late variant does less work
per hour.

    .venv/bin/python benchmarks/scheduler_footprint.py [--window 30] [--period 10] [--tick 5] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # no stubs installed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stats import Row, interleave, record, spread

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


def starts(config: Path) -> dict[str, list[float]]:
    db = sqlite3.connect(config.parent / "state" / "state.sqlite3")
    try:
        rows = db.execute("SELECT item, started FROM sched_runs WHERE status IS NOT NULL").fetchall()
    except sqlite3.OperationalError:
        rows = []  # the scheduler has not made its tables yet
    finally:
        db.close()
    out: dict[str, list[float]] = {}
    for item, started in rows:
        out.setdefault(item, []).append(started)
    return {k: sorted(v) for k, v in out.items()}


def lateness(config: Path, since: float, until: float, period: float) -> list[float]:
    """Per run started in [since, until): its start minus (the item's previous start + period)."""
    late = []
    for times in starts(config).values():
        late += [b - a - period for a, b in zip(times, times[1:], strict=False) if since <= b < until]
    return late


def wait_round(config: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    db = config.parent / "state" / "state.sqlite3"
    while time.monotonic() < deadline:
        if db.exists() and sum(len(v) for v in starts(config).values()) >= count:
            return
        time.sleep(0.2)
    raise SystemExit(f"the first round did not finish within {timeout}s")


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@dataclass(frozen=True)
class Round:
    cpu_h: float
    rss_mib: float
    late: list[float]
    cpu_s: float

    @property
    def cpu_per_run(self) -> float:
        """CPU seconds per item run: the variants may not get the same work done."""
        return self.cpu_s / max(1, len(self.late))


def resident(config: Path, window: float, period: float) -> Round:
    state = config.parent / "state"
    subprocess.run(["rm", "-rf", str(state)], check=True)
    proc = subprocess.Popen(watchdogs(config, "run"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ps = psutil.Process(proc.pid)
    try:
        wait_round(config, DROPINS + CHECKS, 120)
        before, t0, since = cpu(ps), time.monotonic(), time.time()
        rss = 0
        while time.monotonic() - t0 < window:
            rss = max(rss, ps.memory_info().rss)
            time.sleep(0.2)
        used, until = cpu(ps) - before, time.time()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return Round(used / window * 3600, rss / 2**20, lateness(config, since, until, period), used)


def pulse(config: Path, window: float, period: float, tick: float) -> Round:
    subprocess.run(watchdogs(config, "run", "--once"), capture_output=True, check=False)  # all on time
    before, t0, since, rss = children_cpu(), time.monotonic(), time.time(), 0
    n = 0
    while time.monotonic() - t0 < window:
        proc = subprocess.Popen(watchdogs(config, "run", "--once", "--due"), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        with_ps = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                rss = max(rss, with_ps.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(0.02)
        proc.wait()
        n += 1
        time.sleep(max(0.0, t0 + n * tick - time.monotonic()))
    until = time.time()
    used = children_cpu() - before
    return Round(used / (time.monotonic() - t0) * 3600, rss / 2**20, lateness(config, since, until, period),
                 used)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured per round")
    parser.add_argument("--period", type=float, default=10.0, help="every item's period")
    parser.add_argument("--tick", type=float, default=5.0, help="[scheduler] tick, and the pulse interval")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    period, tick = f"{args.period:g}s", f"{args.tick:g}s"
    out: dict[str, list[Round]] = {"resident": [], "pulse": []}
    with tempfile.TemporaryDirectory(prefix="wd-bench-") as tmp:
        res_cfg = make_site(Path(tmp) / "resident", period, tick)
        pulse_cfg = make_site(Path(tmp) / "pulse", period, tick)

        def run(name: str) -> float:
            out[name].append(resident(res_cfg, args.window, args.period) if name == "resident"
                             else pulse(pulse_cfg, args.window, args.period, args.tick))
            return out[name][-1].cpu_h
        interleave({"resident": lambda: run("resident"), "pulse": lambda: run("pulse")},
                   args.rounds, warmup=0)
    print(f"scheduler footprint: {DROPINS} drop-ins + {CHECKS} `disk` checks, each every {period}, "
          f"tick {tick}, {args.rounds} rounds of {args.window:g}s each, interleaved; {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    figures = {}
    for name, rounds in out.items():
        late = [x for r in rounds for x in r.late]
        figures[name] = (spread([r.cpu_h for r in rounds]).fmt(1, " CPU s/h", 0) + ", "
                         + spread([r.cpu_per_run for r in rounds]).fmt(1000, " ms/run", 0),
                         spread([r.rss_mib for r in rounds]).fmt(1, " MiB", 0),
                         spread(late).fmt(1, " s", 2) if late else "no runs")
        cpu_s, rss, late_s = figures[name]
        print(f"{name:9s} CPU {cpu_s} | RSS {rss} | lateness per run {late_s}")
    cmd = ".venv/bin/python benchmarks/scheduler_footprint.py"
    record(__file__, [Row(
        f"resident scheduler, {DROPINS} drop-ins + {CHECKS} checks every {period}: CPU, RSS, lateness "
        "per run (start − previous start − period)",
        "less CPU than a pulse; lateness ≪ tick (proposed)",
        f"a `run --once --due` pulse every {tick}, interleaved",
        f"CPU {figures['resident'][0]} vs {figures['pulse'][0]}; RSS {figures['resident'][1]} vs "
        f"{figures['pulse'][1]}; lateness {figures['resident'][2]} vs {figures['pulse'][2]}", cmd)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
