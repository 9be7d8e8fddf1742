"""A scheduler stand-in for the crash tests, run as its own process:

    python crash_driver.py CONFIG tick       # handle one failing tick, say "enqueued", then hang
                                            # where the scheduler would flush (the test kill -9s it)
    python crash_driver.py CONFIG tick-send  # handle, then flush (the test kill -9s it mid-send)
    python crash_driver.py CONFIG restart    # a restarted scheduler: flush(force=True), as run --once
"""
from __future__ import annotations

import sys
import time
from datetime import datetime, timezone

from watchdogs.alerts import build_sink
from watchdogs.config import load_config
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore


def main(config_path: str, mode: str) -> None:
    config = load_config(config_path)
    sink = build_sink(config, StateStore(config.scheduler.state_dir))
    now = datetime.now(timezone.utc)
    if mode in ("tick", "tick-send"):
        result = CheckResult(Status.CRITICAL, "job 4242 FAILED", context={"job": "4242"})
        sink.handle([ItemOutcome("train-job", "check", result, now, now)], now)
        print("enqueued", flush=True)
        if mode == "tick":
            time.sleep(600)
    sink.flush(now, force=(mode == "restart"))
    print("flushed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
