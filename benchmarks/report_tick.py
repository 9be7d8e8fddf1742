#!/usr/bin/env python3
"""What the status page costs a scheduler tick: keeping its history (the training's events
and samples, the nodes' counts) and rewriting `<state_dir>/report.html` (the scheduler does
every 6 ticks, at most once a minute).

A tick writes its heartbeat (`Records.beat`) and records the runs it finished
(`Records.finished`: one transaction). Interleaved (A, B, C, A, ...), SAMPLES of each, wall
time and CPU time of the process:
  tick                    beat, and a job and a nodes check's runs recorded without looks;
  tick + history          the same runs with their looks (watchdogs.scheduler.story writes
                          events and node counts in the run's transaction), and a training
                          check's sample (its own transaction, as the check writes it);
  tick + history + page   the same, then the scheduler's PageRefresher (gather from the
                          state database, render with the template compiled once, write
                          beside and rename).

The state holds what a busy week leaves (the default log_retention is 7 days): ITEMS items
run every 5 minutes for a week (sched_runs), two disk checks read every minute for 8 days
(disk_history, the check's own retention), ALERTS alert events, 30 instances, a training
sampled every minute for a week with a requeue a day, and a nodes check whose counts changed
every hour. Rows are inserted directly: they are the conditions of the measure, not its
subject.

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
from watchdogs.result import BadNode, CheckResult, JobLook, NodesLook, Status
from watchdogs.scheduler.records import Records
from watchdogs.scheduler.runs import FinishedRun
from watchdogs.state import history
from watchdogs.state.store import StateStore

ITEMS, ALERTS, SAMPLES = 12, 200, 15
WEEK, DAY = 7 * 86400.0, 86400.0


def site(root: Path) -> Path:
    (root / "a").mkdir()
    (root / "b").mkdir()
    config = root / "watchdogs.toml"
    config.write_text('[scheduler]\nstate_dir = "state"\n\n'
                      '[[check]]\nname = "scratch"\ntype = "disk"\npath = "a"\n\n'
                      '[[check]]\nname = "home"\ntype = "disk"\npath = "b"\n\n'
                      '[[check]]\nname = "train"\ntype = "job"\njob_name = "train"\n\n'
                      '[[check]]\nname = "nodes"\ntype = "nodes"\n')
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
    rows += fill_history(store, now)
    for name in ("scratch", "home"):
        store.kv_put(LEVELS, name, {"bytes_cap": 2e12, "inodes_cap": 1e7, "window": DAY, "warn": 1.6e12,
                                    "crit": 1.8e12, "inodes_warn": 8e6, "inodes_crit": 9e6})
    return rows + ALERTS


def fill_history(store: StateStore, now: float) -> int:
    with store.transaction() as db:
        db.execute("INSERT INTO sched_items (item, kind, last_status, last_summary, last_started)"
                   " VALUES ('train', 'check', 0, 'running', ?)", (now,))
        samples = [history.Sample(float(t), (t - int(now - WEEK)) // 6, 410.0, "samples", 2.5 - t / now,
                                  (t - int(now - WEEK)) // 600 * 100, (t - int(now - WEEK)) // 86400, "train")
                   for t in range(int(now - WEEK), int(now), 60)]
        for sample in samples:
            history.add_sample(db, "train", sample)
        events = [history.Event("train", now - WEEK + d * DAY + k, kind, "4242", "waiting again (BeginTime)")
                  for d in range(7) for k, kind in enumerate(("requeued", "running"))]
        history.add_events(db, events)
        counts = [history.NodeCount(now - WEEK + h * 3600.0, h % 3, h % 2, 64) for h in range(7 * 24)]
        for count in counts:
            history.add_node_count(db, "nodes", count, [("node7", "drained", "bad gpu")])
    return len(samples) + len(events) + len(counts)


def runs(now: float, looks: bool) -> list[FinishedRun]:
    """A job and a nodes check's runs, with or without what they saw."""
    job = JobLook("running", "4242", now - 3600.0) if looks else None
    nodes = NodesLook((BadNode("node7", "drained", "bad gpu"),), 64) if looks else None
    return [FinishedRun("train", "check", 1, now, now + 0.1, CheckResult(Status.OK, "running", look=job)),
            FinishedRun("nodes", "check", 1, now, now + 0.1, CheckResult(Status.WARNING, "1 drained",
                                                                           look=nodes))]


def training_sample(store: StateStore, now: float) -> None:
    """What the training check writes each look (watchdogs.checks.training._sample)."""
    history.ensure(store)
    with store.transaction() as db:
        history.last_phase(db, "train")
        history.add_sample(db, "train", history.Sample(now, 100_000, 410.0, "samples", 1.5, 99_000,
                                                       history.restarts(db, "train", "4242"), "train"))


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
            now = time.time()
            records.beat(instance, now, {})
            records.finished(runs(now, looks=False))

        def tick_and_history() -> None:
            now = time.time()
            records.beat(instance, now, {})
            records.finished(runs(now, looks=True))
            training_sample(store, now)

        def tick_history_page() -> None:
            tick_and_history()
            page(time.time())

        variants = {"tick": tick, "tick + history": tick_and_history,
                    "tick + history + page": tick_history_page}
        walls = interleave({k: timed(f) for k, f in variants.items()}, SAMPLES)
        cpus = interleave({k: cpu(f) for k, f in variants.items()}, SAMPLES)
        size = page.out.stat().st_size
        store.close()
    base = spread(walls["tick"])

    def added(variant: str, over: str, samples: dict[str, list[float]]) -> str:
        return spread([b - a for a, b in zip(samples[over], samples[variant], strict=True)]).fmt(1e3, " ms")

    page_cpu = spread([b - a for a, b in zip(cpus["tick + history"], cpus["tick + history + page"],
                                             strict=True)])
    print(f"state: {rows} rows ({ITEMS + 2} items every 5 min for a week, 2 disk histories of 8 days "
          f"at 1/min, {ALERTS} alert events, a week of training samples at 1/min); "
          f"page {size / 1024:.0f} KiB")
    for name in variants:
        print(f"{name:<22} {spread(walls[name]).fmt(1e3, ' ms')}")
    record(__file__, [
        Row("history kept per tick (events, node counts, a training sample)", "cheap next to a tick",
            f"a tick without it: {base.fmt(1e3, ' ms')}",
            f"+{added('tick + history', 'tick', walls)} wall, +{added('tick + history', 'tick', cpus)} CPU",
            ".venv/bin/python benchmarks/report_tick.py"),
        Row("status page rewrite per tick (a busy week of state and history)", "cheap next to a tick",
            f"a tick with history, without the page: {spread(walls['tick + history']).fmt(1e3, ' ms')}",
            f"+{added('tick + history + page', 'tick + history', walls)} wall, "
            f"+{page_cpu.fmt(1e3, ' ms')} CPU; page {size / 1024:.0f} KiB; written every {every:.0f} s: "
            f"{page_cpu.median / every * 100:.2f} % of a core",
            ".venv/bin/python benchmarks/report_tick.py")])


if __name__ == "__main__":
    main()
