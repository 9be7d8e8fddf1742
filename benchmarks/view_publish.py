#!/usr/bin/env python3
"""What publishing the state view (`view.sqlite3`, watchdogs.state.snapshot) costs the chain
each tick, against a tick without it, on a busy week's state (the one of report_tick.py:
61,000 rows). The chain publishes every tick, also when only its heartbeat changed: the view
carries the heartbeat `status` reads on other hosts, so a view published only on change
would make a healthy scheduler look stale there. Measured so that the choice has a number.

Interleaved (tick, tick + publish, ...), SAMPLES of each, wall and CPU time:
  tick             Records.beat, as every tick does;
  tick + publish   the same, then snapshot.publish (backup API into a temporary file,
                   fsync, rename, fsync the folder).

    .venv/bin/python benchmarks/view_publish.py
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _stats import Row, interleave, record, spread
from report_tick import cpu, fill, site, timed

from watchdogs.config import load_config
from watchdogs.scheduler.records import Records
from watchdogs.state import snapshot
from watchdogs.state.store import StateStore

SAMPLES = 15


def main() -> None:
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:  # a disk, not /tmp's tmpfs: fsync counts
        config = load_config(site(Path(tmp)))
        store = StateStore(config.scheduler.state_dir)
        now = time.time()
        rows = fill(store, now)
        records = Records(store)
        instance = records.begin_instance(now, "2000", "chain")

        def tick() -> None:
            records.beat(instance, time.time(), {})

        def tick_and_publish() -> None:
            tick()
            snapshot.publish(store, "chain instance 1", time.time())

        variants = {"tick": tick, "tick + publish": tick_and_publish}
        walls = interleave({k: timed(f) for k, f in variants.items()}, SAMPLES)
        cpus = interleave({k: cpu(f) for k, f in variants.items()}, SAMPLES)
        size = (config.scheduler.state_dir / snapshot.VIEW_NAME).stat().st_size
        store.close()
    wall = spread([b - a for a, b in zip(walls["tick"], walls["tick + publish"], strict=True)])
    used = spread([b - a for a, b in zip(cpus["tick"], cpus["tick + publish"], strict=True)])
    tick_s = config.scheduler.tick
    print(f"state: {rows} rows; view {size / 2**20:.1f} MiB")
    base = spread(walls["tick"]).fmt(1e3, " ms")
    mib = size / 2**20
    record(__file__, [Row(f"state view published per tick (a busy week of state, view {mib:.1f} MiB)",
                          "cheap next to a tick", f"a tick without it: {base}",
                          f"+{wall.fmt(1e3, ' ms')} wall, +{used.fmt(1e3, ' ms')} CPU; every "
                          f"{tick_s:.0f} s: {used.median / tick_s * 100:.2f} % of a core",
                          ".venv/bin/python benchmarks/view_publish.py")])


if __name__ == "__main__":
    main()
