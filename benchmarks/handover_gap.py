"""Seconds without a check across a chain handover: the chain before issue 34 (one
successor behind `afterany:<self>,singleton`) against the overlapping next, on the dev
cluster, interleaved round by round (old, new, old, new, ...).

Each sample starts a real chain (`watchdogs start`, the variant's own code and batch
script) in a fresh site with one drop-in due every 2 s and a 1 s tick, waits for it to
run, then triggers the handover as it happens:

  old   the time limit's signal (`scancel --batch --signal=USR1 <instance>`): the instance
        ends, then its successor may start (singleton)
  new   the next's begin time comes (`scontrol update JobId=<next> StartTime=now`, what
        `--begin=EndTime - handover_lead` does by itself): it starts while the instance
        still runs, asks it to hand over, and takes over the state

and reports the largest gap between consecutive starts of the drop-in across the
handover (from the state database), minus the period: 0 means no check was late.
Only the idle cluster is measured here (a full one needs another user's jobs: not done).
"today" is `git archive <rev>` of watchdogs, notifiers and slurm, run with PYTHONPATH (as
guard_ab.py does).

    WATCHDOGS_CLUSTER_DIR=/tmp/wdc SLURM_CONF=/tmp/wdc/slurm.conf \\
      .venv/bin/python benchmarks/handover_gap.py [--rounds 3] [--old-rev main] [--old-tree DIR]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
PERIOD = 2.0
T = TypeVar("T")


def wait_for(what: str, predicate: Callable[[], T | None], timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.3)
    raise SystemExit(f"handover_gap: {what} not seen within {timeout:.0f}s")


def squeue(name: str) -> list[tuple[str, str, str]]:
    out = subprocess.run(["squeue", "--me", "--noheader", f"--name={name}", "--format=%i|%T|%k"],
                         capture_output=True, text=True, check=False).stdout
    return [tuple(line.split("|", 2)) for line in out.split()]  # type: ignore[misc]  # why: three fields


def running(name: str, not_: str | None = None) -> str | None:
    return next((j for j, state, _ in squeue(name) if state == "RUNNING" and j != not_), None)


def queued_next(name: str) -> str | None:
    return next((j for j, state, c in squeue(name) if state == "PENDING" and c.startswith("watchdogs:next:")),
                None)


def old_tree(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "watchdogs", "notifiers", "slurm"],
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryFile() as fh:
        fh.write(archive)
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(into, filter="data")
    return into


def sample(variant: str, tree: Path, root: Path) -> float:
    from watchdogs.scheduler.records import Records
    from watchdogs.state.store import StateStore

    site = root / f"{variant}-{uuid.uuid4().hex[:6]}"
    name = f"wdgap-{uuid.uuid4().hex[:8]}"
    (site / "cron.d" / "cron.hourly").mkdir(parents=True, mode=0o700)
    for sub in ("cron.daily", "cron.weekly"):
        (site / "cron.d" / sub).mkdir(mode=0o700)
    (site / "cron.d").chmod(0o700)
    tick = site / "cron.d" / "cron.hourly" / "tick"
    tick.write_text("#!/bin/sh\necho 'tick OK'\n")
    tick.chmod(0o700)
    config = site / "watchdogs.toml"
    config.write_text(f'[scheduler]\nstate_dir = "state"\ntick = "1s"\njob_name = "{name}"\n'
                      f'[cron]\nhourly = "{PERIOD:g}s"\ndaily = "1h"\nweekly = "7d"\n')
    env = {**os.environ, "PYTHONPATH": str(tree), "WATCHDOGS_CONFIG": str(config),
           "WATCHDOGS_PYTHON": sys.executable}
    subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(config), "start"], env=env, cwd=site,
                   check=True, capture_output=True, timeout=60)
    try:
        first = wait_for("the first instance", lambda: running(name))
        db = site / "state"

        def starts() -> list[float]:
            if not (db / "state.sqlite3").exists():
                return []
            runs = Records(StateStore(db)).history("cron.hourly/tick")
            return sorted(float(h["started"]) for h in runs if h["status"] is not None)
        wait_for("three runs", lambda: len(starts()) >= 3 or None)
        if variant == "old":
            subprocess.run(["scancel", "--batch", "--signal=USR1", first], check=True)
        else:
            nxt = wait_for("a next", lambda: queued_next(name))
            subprocess.run(["scontrol", "update", f"JobId={nxt}", "StartTime=now"], check=True)
        handed = time.time()
        wait_for("the successor", lambda: running(name, first))
        wait_for("three runs after it", lambda: len([t for t in starts() if t > handed]) >= 3 or None)
        ticks = starts()
        around = [t for t in ticks if t > handed - 3 * PERIOD]
        return max(b - a for a, b in zip(around, around[1:], strict=False)) - PERIOD
    finally:
        (site / "state").mkdir(exist_ok=True)
        (site / "state" / "STOP").write_text("benchmark\n")
        subprocess.run(["scancel", "--me", f"--name={name}"], check=False)
        wait_for("the chain to end", lambda: not squeue(name) or None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old-rev", default="main")
    parser.add_argument("--old-tree", type=Path, default=None,
                        help="an extracted `git archive` of the old rev (when git cannot run as this user)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="handover-gap-") as tmp:
        root = Path(tmp)
        old = args.old_tree or old_tree(args.old_rev, root / "old-tree")
        trees = {"old": old, "new": REPO}
        gaps: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(args.rounds):
            for variant in ("old", "new"):
                gaps[variant].append(sample(variant, trees[variant], root))
                print(f"{variant}: {gaps[variant][-1]:.2f} s late", flush=True)
    print("\n| chain | idle cluster: seconds a check was late across the handover (median, max) | n |")
    print("| --- | --- | --- |")
    for variant, label in (("old", f"afterany+singleton ({args.old_rev})"), ("new", "overlapping next")):
        values = gaps[variant]
        print(f"| {label} | {statistics.median(values):.2f} s, {max(values):.2f} s | {len(values)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
