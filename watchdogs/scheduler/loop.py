"""The scheduler: APScheduler decides *when* (watchdogs.scheduler.timetable), this loop
decides *what runs together*.

Each item is an APScheduler job whose trigger fires at its due times. A job does not run
the item: the timetable puts "due" on a queue, and this loop gathers everything due at the
same moment into one batch (one TickContext, so one squeue and one sinfo serve every check
of it), starts it, and hands every finished run of the tick to the result sink in one call.
Every `tick` it has the timetable rescan cron.d, writes the heartbeat, flushes the sink and
runs periodic chores.
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING

from tzlocal import get_localzone

from watchdogs import units
from watchdogs.scheduler import metrics
from watchdogs.scheduler import records as records_schema
from watchdogs.scheduler.chores import Periodic, run_due
from watchdogs.scheduler.held import HeldOutcomes
from watchdogs.scheduler.prune import prune_state
from watchdogs.scheduler.records import GuardedRecords, Records
from watchdogs.scheduler.runner import Due, Finished, LoopEvent, Runner
from watchdogs.scheduler.runs import FinishedRun, cut_off_by_job_end
from watchdogs.scheduler.stopflag import StopFlag
from watchdogs.scheduler.timetable import Timetable
from watchdogs.state import history

if TYPE_CHECKING:
    from watchdogs.config.model import Config
    from watchdogs.plugins import Registry
    from watchdogs.scheduler.items import Item
    from watchdogs.scheduler.publish import StateOwner
    from watchdogs.sink import ItemOutcome, ResultSink
    from watchdogs.state.store import StateStore

LOG = logging.getLogger("watchdogs.scheduler")
POLL_S = 0.5
"""How often the loop looks at the stop flag while idle (a signal handler only sets it)."""
COALESCE_S = 0.05
"""Items due within this of each other run as one batch."""
PRUNE_EVERY_S = 3600.0
CATCH_UP_S = 5.0
"""After a gap, runs started this long past the first tick (an instance's start-up: the
state, the timetable) still count as its catch-up runs."""


class Scheduler:
    def __init__(self, config: Config, store: StateStore, sink: ResultSink, registry: Registry,
                 *, instance: int, stop: StopFlag, periodic: Sequence[Periodic] = (),
                 env: dict[str, str] | None = None, uid: int | None = None,
                 clock: Callable[[], float] = time.time, tz: tzinfo | None = None,
                 on_state_error: Callable[[BaseException, datetime], object] | None = None,
                 owner: StateOwner | None = None, last_word: Callable[[str], None] | None = None,
                 gap: tuple[float, float] | None = None) -> None:
        """`on_state_error`: the state directory could not be written (full, broken,
        corrupt); without it such an error stops the scheduler. `owner`: this instance owns
        the state database (applies queued changes, publishes the view). `last_word`: called
        with the reason when a signal other than a handover stops the loop, before the items
        in progress are waited for (Slurm's KillWait is short). `gap`: (from, to) when nothing
        watched before this instance: what its catch-up runs find is marked seen late."""
        self.config = config
        self.sink = sink
        self.records = (Records(store) if on_state_error is None else
                        GuardedRecords(store, lambda exc: on_state_error(exc, _dt(clock()))))
        self.instance = instance
        self.stop = stop
        self.periodic = list(periodic)
        self.clock = clock
        self.events: queue.Queue[LoopEvent] = queue.Queue()
        self.runner = Runner(config, store, self.records, self.events, instance, env, clock)
        self.held = HeldOutcomes()
        self.owner = owner
        self.last_word = last_word
        self.gap = gap
        self.timetable = Timetable(config, registry, self.records, tz or get_localzone(),
                                   lambda item, at: self.events.put(Due(item, at)), uid=uid,
                                   resolve_removed=owner is not None)

    def run(self) -> str:
        """Run until the stop flag is raised; returns why it stopped."""
        now = self.clock()
        for item in self.records.close_interrupted(self.instance, now):
            LOG.warning("%s: its last run was cut off when the previous instance ended; it counts as "
                        "not run", item)
        self._prune(now)
        self._sync(now)
        LOG.info("scheduling %d items (tick %s, state in %s); %d refused", len(self.timetable.items),
                 units.format_duration(self.config.scheduler.tick), self.config.scheduler.state_dir,
                 len(self.timetable.refused))
        self.timetable.start()
        last_chores = {p.name: now for p in self.periodic}
        next_tick, last_prune = 0.0, now
        while self.stop.request is None:
            dues, finished = self._collect(max(0.0, next_tick - time.monotonic()))
            now = self.clock()
            self._dispatch(dues, now)
            self._settle(finished, now)
            self._apply_changes(now)
            tick = time.monotonic() >= next_tick
            self._deliver(now, tick)
            if tick:
                next_tick = time.monotonic() + self.config.scheduler.tick
                self._tick(now)
                if now - last_prune >= PRUNE_EVERY_S:
                    last_prune = now
                    self._prune(now)
                run_due(self.periodic, now, last_chores)
        return self._shutdown()

    def use_store(self, store: StateStore) -> None:
        """Carry on with another state database: a scratch one while the state directory
        is full or broken (checks keep their memory there, drop-ins their logs), the real
        one again when it can be written. Taken by the next batch started."""
        store.ensure_schema(records_schema.SCHEMA, records_schema.VERSION, records_schema.DDL)
        history.ensure(store)
        self.records.store = store
        self.runner.store = store

    # -- the loop's steps ----------------------------------------------------------------
    def _collect(self, timeout: float) -> tuple[list[Due], list[tuple[FinishedRun, Item]]]:
        try:
            events = [self.events.get(timeout=min(timeout, POLL_S))]
        except queue.Empty:
            return [], []
        deadline = time.monotonic() + (COALESCE_S if isinstance(events[0], Due) else 0.0)
        while True:
            try:
                events.append(self.events.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        dues = [e for e in events if isinstance(e, Due)]
        return dues, [(e.run, e.item) for e in events if isinstance(e, Finished)]

    def _dispatch(self, dues: list[Due], now: float) -> None:
        if not dues or self.stop.request is not None:
            return
        items = self.timetable.items
        scheduled = {d.item: d.scheduled for d in dues if d.item in items}
        batch = [items[i] for i in scheduled]
        for skip in self.runner.start(batch, now, scheduled):
            LOG.info("%s: %s; this run is skipped", skip.item, skip.reason)
        self.records.plan({i: self.timetable.next_run(i) for i in scheduled})

    def _settle(self, finished: list[tuple[FinishedRun, Item]], now: float) -> None:
        """Record finished runs at once; their outcomes go to the sink together (`_deliver`)."""
        if not finished:
            return
        finished = cut_off_by_job_end(finished, lambda: self.stop.request is not None, POLL_S)
        for run, _item in finished:
            self.runner.settle(run)
        self.records.finished([run for run, _ in finished])
        for run, item in finished:
            if run.result is None:
                LOG.warning("%s: interrupted (the scheduler is stopping); counts as not run", run.item)
                continue
            LOG.info("%s: %s: %s", run.item, run.result.status.name, run.result.summary)
            found = item.outcome(run.result, _dt(run.started), _dt(run.finished), run.log)
            self.held.add([self._late(found, run.started)])

    def _late(self, found: ItemOutcome, started: float) -> ItemOutcome:
        """A run of the first tick after a gap (its catch-up) found what happened in the gap."""
        if self.gap is None or started > self.gap[1] + self.config.scheduler.tick + CATCH_UP_S:
            return found
        return dataclasses.replace(found, seen_late=self.gap)

    def _deliver(self, now: float, tick: bool) -> None:
        """One sink call with every outcome since the last, once their batch has settled."""
        outcomes = self.held.take(self.runner.busy(), tick, [r.started for r in self.runner.running.values()])
        if not outcomes:
            return
        try:
            self.sink.handle(outcomes, _dt(now))
        except Exception:
            LOG.exception("the result sink failed to take %d outcomes", len(outcomes))

    def _tick(self, now: float) -> None:
        self._sync(now)
        self.records.beat(self.instance, now, {i: self.timetable.next_run(i) for i in self.timetable.items})
        if self.owner is not None:
            try:
                self.owner.tick(now)
            except Exception:
                LOG.exception("the state view could not be published")
        try:
            self.sink.flush(_dt(now))
        except Exception:
            LOG.exception("the result sink failed to flush")
        metrics.write_tick(self.config.scheduler.metrics_dir, self.runner.store, now)
        if self.config.scheduler.stop_file.exists():
            self.stop.raise_(f"stop file {self.config.scheduler.stop_file} appeared", grace=30.0)

    def _apply_changes(self, now: float) -> None:
        """Changes queued by other processes (silence, ack, resolve); resolutions go out
        with the next delivery."""
        if self.owner is None:
            return
        try:
            made = self.owner.poll(now)
        except Exception:
            LOG.exception("queued changes could not be applied")
            return
        self.held.add(made)

    def _sync(self, now: float) -> None:
        self.held.add(self.timetable.sync(now))

    def _prune(self, now: float) -> None:
        prune_state(self.config.scheduler, self.records, now)

    def _shutdown(self) -> str:
        reason, grace = self.stop.request or ("stopped", 0.0)
        if self.last_word is not None and self.stop.kind in ("terminate", "unexpected"):
            began = time.monotonic()
            try:
                self.last_word(reason)
            except Exception:
                LOG.exception("the last word could not be said")
            # The word took part of KillWait: the drain gets what is left of its grace.
            grace = max(0.5, grace - (time.monotonic() - began))
        LOG.info("stopping (%s): waiting up to %.0fs for %d running items", reason, grace,
                 len(self.runner.running))
        self.timetable.shutdown()
        self.runner.stop(grace)
        finished = []
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                break
            if isinstance(event, Finished):
                finished.append((event.run, event.item))
        now = self.clock()
        self._settle(finished, now)
        self._deliver(now, tick=True)
        self.records.beat(self.instance, now, {})
        try:
            self.sink.flush(_dt(now))
        except Exception:
            LOG.exception("the result sink failed to flush")
        return reason


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)
