"""The scheduler loop in-process, with a check type of the tests' own: batching into one
TickContext, one sink call per tick, hung checks, catch-up from the database."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.helpers import wait_for
from tests.scheduler.conftest import Probe, RecordingSink, Site, probe_registry, script
from watchdogs.config import load_config
from watchdogs.result import CheckResult, Status
from watchdogs.scheduler.loop import Scheduler
from watchdogs.scheduler.records import Records
from watchdogs.scheduler.runs import FinishedRun
from watchdogs.scheduler.stopflag import StopFlag
from watchdogs.state.store import StateStore


@contextmanager
def running(site: Site, probe: Probe, sink: RecordingSink) -> Iterator[Scheduler]:
    registry = probe_registry(probe)
    config = load_config(site.config, checks=registry)
    store = StateStore(config.scheduler.state_dir)
    instance = Records(store).begin_instance(time.time(), None, "foreground")
    stop = StopFlag()
    scheduler = Scheduler(config, store, sink, registry, instance=instance, stop=stop)
    thread = threading.Thread(target=scheduler.run, daemon=True)
    thread.start()
    try:
        yield scheduler
    finally:
        stop.raise_("test over", 0.0)
        thread.join(10)
    assert not thread.is_alive()


def checks(*tables: str) -> str:
    return "\n".join(tables)


def probe_table(name: str, every: str = "1s", extra: str = "") -> str:
    return f'[[check]]\nname = "{name}"\ntype = "probe"\nevery = "{every}"\n{extra}\n'


def test_checks_due_together_share_one_tick_context_and_one_snapshot(site: Site, probe: Probe) -> None:
    site.write_config(checks(probe_table("a"), probe_table("b"), probe_table("c")))
    sink = RecordingSink()
    with running(site, probe, sink):
        wait_for(lambda: len(probe.runs) >= 9, timeout=10, what="three ticks of three checks")
    contexts: dict[int, set[str]] = {}
    for name, ctx in probe.runs:
        contexts.setdefault(ctx, set()).add(name)
    full = [names for names in contexts.values() if len(names) == 3]
    assert len(full) >= 3 and all(len(n) == 3 for n in contexts.values())
    assert probe.snapshots == len(contexts)  # one snapshot per tick, not per check


def test_every_outcome_of_a_tick_reaches_the_sink_in_one_call(site: Site, probe: Probe) -> None:
    site.write_config(checks(probe_table("a"), probe_table("b")))
    sink = RecordingSink()
    with running(site, probe, sink):
        wait_for(lambda: len(sink.handled) >= 2, timeout=10)
    assert all(sorted(o.item for o in batch) == ["a", "b"] for batch in sink.handled)
    assert all(o.kind == "check" and o.result.status is Status.OK for o in sink.handled[0])
    assert sink.flushes and not any(sink.flushes)  # flushed every tick, never forced


def test_hung_check_is_unknown_and_not_started_again_while_stuck(site: Site, probe: Probe) -> None:
    site.write_config(checks(probe_table("stuck", extra='hang = true\ntimeout = "1s"'), probe_table("fine")))
    sink = RecordingSink()
    with running(site, probe, sink):
        wait_for(lambda: sink.items().count("stuck") >= 3, timeout=10)
        fine_runs = sink.items().count("fine")
    stuck = [o.result.summary for batch in sink.handled for o in batch if o.item == "stuck"]
    assert stuck[0] == "did not finish within 1 s"
    assert all("has not returned; not started again" in s for s in stuck[1:])
    assert [name for name, _ in probe.runs].count("stuck") == 1  # one thread stuck, not one per period
    assert fine_runs >= 2  # the others went on


def test_overdue_item_catches_up_once_and_a_recent_one_waits(site: Site, probe: Probe) -> None:
    site.write_config(checks(probe_table("overdue", every="1h"), probe_table("recent", every="1h")))
    store = StateStore(site.state)
    records = Records(store)
    now = time.time()
    ok = CheckResult(Status.OK, "earlier")
    records.finished([FinishedRun("overdue", "check", None, now - 30 * 3600, now - 30 * 3600, ok),
                      FinishedRun("recent", "check", None, now - 60, now - 59, ok)])
    sink = RecordingSink()
    with running(site, probe, sink):
        wait_for(lambda: "overdue" in sink.items(), timeout=5)
        time.sleep(1.5)
    assert sink.items() == ["overdue"]  # once, not once per missed hour; "recent" not yet
    row = Records(store).items()["recent"]
    assert row["next_run"] == pytest.approx(now - 60 + 3600, abs=1)


def test_dropin_that_outlasts_its_period_never_overlaps_itself(site: Site, probe: Probe) -> None:
    marks = site.root / "marks"
    site.dropin("slow", script(f"echo start >> {marks}\nsleep 1.3\necho end >> {marks}\necho done"))
    site.write_config(hourly="1s")
    sink = RecordingSink()
    with running(site, probe, sink):
        wait_for(lambda: sink.items().count("cron.hourly/slow") >= 2, timeout=15)
    lines = marks.read_text().split()
    assert lines[:4] == ["start", "end", "start", "end"]


def test_new_dropin_is_picked_up_without_a_restart(site: Site, probe: Probe) -> None:
    sink = RecordingSink()
    with running(site, probe, sink):
        time.sleep(1.2)
        site.dropin("late", script("echo 'late OK'"))
        wait_for(lambda: "cron.hourly/late" in sink.items(), timeout=5)
    (outcome,) = [o for b in sink.handled for o in b if o.item == "cron.hourly/late"][:1]
    assert (outcome.kind, outcome.result.summary) == ("dropin", "late OK")
