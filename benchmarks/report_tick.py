#!/usr/bin/env python3
"""What rewriting the status page (`<state_dir>/report.html`) adds to a scheduler tick that
writes it (the scheduler does every 6 ticks, at most once a minute).

A tick always writes its heartbeat (`Records.beat`: one transaction, one fsync). Interleaved
(tick, tick + page, tick, ...), SAMPLES of each, wall time and CPU time of the process:
  tick         Records.beat, as every tick does;
  tick + page  the same, then the scheduler's PageRefresher (gather from the state database,
               render with the template compiled once, write beside and rename).

The state holds what a busy week leaves (the default log_retention is 7 days): ITEMS items
run every 5 minutes for a week (sched_runs), two disk checks read every minute for 8 days
(disk_history, the check's own retention), ALERTS alert events, 30 instances. Rows are
inserted directly: they are the conditions of the measure, not its subject.

    .venv/bin/python benchmarks/report_tick.py
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _stats import Row, interleave, record, spread

from watchdogs.checks.disk import HISTORY_DDL, LEVELS
from watchdogs.config import load_config
from watchdogs.report.refresh import PageRefresher
from watchdogs.scheduler.records import Records
from watchdogs.state.store import StateStore

ITEMS, ALERTS, SAMPLES = 12, 200, 15
WEEK, DAY = 7 * 86400.0, 86400.0


def site(root: Path) -> Path:
    (root / "a").mkdir()
    (root / "b").mkdir()
    config = root / "watchdogs.toml"
    config.write_text('[scheduler]\nstate_dir = "state"\n\n'
                      '[[check]]\nname = "scratch"\ntype = "disk"\npath = "a"\n\n'
                      '[[check]]\nname = "home"\ntype = "disk"\npath = "b"\n')
    return config


def fill(store: StateStore, now: float) -> int:
    from watchdogs.alerts import schema

    Records(store)
    schema.ensure(store)
    store.ensure_schema("checks.disk", 1, HISTORY_DDL)
    rows = 0
    with store.transaction() as db:
        names = [f"cron.hourly/item{i}" for i in range(ITEMS)] + ["scratch", "home"]
        for n, item in enumerate(names):
            db.execute("INSERT INTO sched_items (item, kind, last_status, last_summary, last_started)"
                       " VALUES (?, 'dropin', 0, 'fine', ?)", (item, now))
            runs = [(item, 1, t, t, t + 2, 0 if (t // 3600 + n) % 9 else 2, "fine, 42 things", None)
                    for t in range(int(now - WEEK), int(now), 300)]
            db.executemany("INSERT INTO sched_runs (item, instance, due, started, finished, status, summary,"
                           " job_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", runs)
            rows += len(runs)
        for name in ("scratch", "home"):
            hist = [(name, float(t), 1e12 + (t - now) * 1e5, 1e6 + (t - now)) for t in
                    range(int(now - 8 * DAY), int(now), 60)]
            db.executemany("INSERT INTO disk_history VALUES (?, ?, ?, ?)", hist)
            rows += len(hist)
        db.executemany("INSERT INTO alert_log (at, item, state, status, summary, channels, silenced_by)"
                       " VALUES (?, ?, ?, ?, ?, 'mail', NULL)",
                       [(now - WEEK + i * WEEK / ALERTS, f"cron.hourly/item{i % ITEMS}",
                         "alert" if i % 2 == 0 else "resolved", "CRITICAL" if i % 2 == 0 else "OK", "down")
                        for i in range(ALERTS)])
        for i in range(30):
            db.execute("INSERT INTO sched_instances (job_id, host, pid, mode, started, heartbeat, ended,"
                       " reason) VALUES (?, 'login1', 1, 'chain', ?, ?, ?, 'handover')",
                       (str(1000 + i), now - WEEK + i * 3600 * 5, now - WEEK + i * 3600 * 5 + 3000,
                        None if i == 29 else now - WEEK + i * 3600 * 5 + 3000))
    for name in ("scratch", "home"):
        store.kv_put(LEVELS, name, {"bytes_cap": 2e12, "inodes_cap": 1e7, "window": DAY, "warn": 1.6e12,
                                    "crit": 1.8e12, "inodes_warn": 8e6, "inodes_crit": 9e6})
    return rows + ALERTS


def timed(fn: Callable[[], object]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    return run


def cpu(fn: Callable[[], object]) -> Callable[[], float]:
    def run() -> float:
        start = time.process_time()
        fn()
        return time.process_time() - start
    return run


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(site(Path(tmp)))
        store = StateStore(config.scheduler.state_dir)
        now = time.time()
        rows = fill(store, now)
        records = Records(store)
        instance = records.begin_instance(now, "2000", "chain")
        page = PageRefresher(config, store)
        every = page.every
        page.every = 0.0  # measure a tick that writes the page (the scheduler writes every `every` s)

        def tick() -> None:
            records.beat(instance, time.time(), {})

        def tick_and_page() -> None:
            tick()
            page(time.time())

        walls = interleave({"tick": timed(tick), "tick + page": timed(tick_and_page)}, SAMPLES)
        cpus = interleave({"tick": cpu(tick), "tick + page": cpu(tick_and_page)}, SAMPLES)
        size = page.out.stat().st_size
        store.close()
    base, with_page = spread(walls["tick"]), spread(walls["tick + page"])
    extra = spread([b - a for a, b in zip(walls["tick"], walls["tick + page"], strict=True)])
    cpu_extra = spread([b - a for a, b in zip(cpus["tick"], cpus["tick + page"], strict=True)])
    print(f"state: {rows} rows ({ITEMS + 2} items every 5 min for a week, 2 disk histories of 8 days "
          f"at 1/min, {ALERTS} alert events); page {size / 1024:.0f} KiB")
    print(f"written every {every:.0f} s with the default {config.scheduler.tick:.0f}-second tick: "
          f"{cpu_extra.median / every * 100:.2f} % of a core")
    print(f"tick        {base.fmt(1e3, ' ms')}")
    print(f"tick + page {with_page.fmt(1e3, ' ms')}")
    record(__file__, [Row("status page rewrite per tick (a busy week of state)", "cheap next to a tick",
                          f"a tick without it: {base.fmt(1e3, ' ms')}",
                          f"+{extra.fmt(1e3, ' ms')} wall, +{cpu_extra.fmt(1e3, ' ms')} CPU; page "
                          f"{size / 1024:.0f} KiB; written every {every:.0f} s: "
                          f"{cpu_extra.median / every * 100:.2f} % of a core",
                          ".venv/bin/python benchmarks/report_tick.py")])


if __name__ == "__main__":
    main()
