"""`watchdogs run --once [--due]`: every item (or only the due ones) once, as one batch,
recorded like a scheduled run, then the sink is flushed with force=True.

It applies the same lifecycle as a tick of the loop when it owns the state (it holds the
scheduler lock, for a moment or, in a home, for the whole run): the changes queued in the
inbox are applied and the open alerts of items that left the config are resolved. A cron,
scrontab or systemd-timer home runs nothing else, so without this a deleted drop-in's alert
would stay open for ever. With a scheduler holding the lock, both are left to it (never
applied twice)."""
from __future__ import annotations

import logging
import os
import queue
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from tzlocal import get_localzone

from watchdogs.dropins.safety import Refusal
from watchdogs.errors import WatchdogsError
from watchdogs.result import Status, worst
from watchdogs.scheduler import metrics
from watchdogs.scheduler.inbox import apply_pending, removed_items
from watchdogs.scheduler.items import Item, all_items
from watchdogs.scheduler.lock import Lock
from watchdogs.scheduler.prune import SCHEDULER_LOGS, prune_files
from watchdogs.scheduler.records import GuardedRecords
from watchdogs.scheduler.refusals import refusal_outcomes
from watchdogs.scheduler.runner import RUNS_DIR, Finished, LoopEvent, Runner, Skip
from watchdogs.scheduler.runs import FinishedRun
from watchdogs.schedules import first_run
from watchdogs.state.store import StateUnavailable

if TYPE_CHECKING:
    from watchdogs.config.model import Config
    from watchdogs.plugins import Registry
    from watchdogs.sink import ItemOutcome, ResultSink
    from watchdogs.state.store import StateStore


LOG = logging.getLogger("watchdogs.scheduler")


class _StateTrouble:
    """Says once that the run is not recorded (the state directory cannot be written)."""

    def __init__(self) -> None:
        self.said = False

    def __call__(self, exc: BaseException) -> None:
        if not self.said:
            self.said = True
            LOG.error("state directory cannot be written (%s): this run is not recorded", exc)


@dataclass(frozen=True)
class OnceReport:
    runs: tuple[FinishedRun, ...]
    refused: tuple[Refusal, ...]
    skipped: tuple[Skip, ...] = ()
    """Due items not run because a run of theirs is going on elsewhere (the scheduler)."""

    @property
    def worst(self) -> Status:
        return worst([r.result.status for r in self.runs if r.result is not None])


def due_items(items: Mapping[str, Item], anchors: Mapping[str, float | None], now: float,
              tz: tzinfo) -> list[Item]:
    """Items whose catch-up time has come: never completed, or a period since the last."""
    now_dt = datetime.fromtimestamp(now, timezone.utc)
    def anchor(item: Item) -> datetime | None:
        value = anchors.get(item.id)
        return datetime.fromtimestamp(value, timezone.utc) if value else None
    return [i for i in items.values() if first_run(i.schedule, anchor(i), now_dt, tz) <= now_dt]


def settle(store: StateStore, state_dir: Path, scheduled: Iterable[str], refused: Iterable[Refusal],
           now: float, applier: str) -> list[ItemOutcome]:
    """What a tick of the loop does beyond running items, for the one writer of the state:
    the queued changes applied (their answers written) and the open alerts of items that
    left the config resolved ("item removed from the config")."""
    made = apply_pending(store, state_dir, applier, now)
    made += removed_items(store, scheduled, [r.path for r in refused], now)
    for outcome in made:
        LOG.info("%s: %s", outcome.item, outcome.result.summary)
    return made


def _settle_if_owner(store: StateStore, state_dir: Path, items: Iterable[str], refused: Iterable[Refusal],
                     now: float, lock_held: bool) -> list[ItemOutcome]:
    """`settle` when this run may write for the state's owner: it holds the scheduler lock
    already (a home), or takes it for this moment. Held by a scheduler: left to it."""
    applier = f"`watchdogs run --once` (pid {os.getpid()})"
    try:
        if lock_held:
            return settle(store, state_dir, items, refused, now, applier)
        lock = Lock(state_dir)
        holder = lock.acquire(f"command run --once (settling, pid {os.getpid()})")
        if holder:
            LOG.info("queued changes and removed items are left to the scheduler holding the state: %s",
                     holder)
            return []
        try:
            return settle(store, state_dir, items, refused, now, applier)
        finally:
            lock.release()
    except StateUnavailable:
        raise
    except WatchdogsError as exc:  # said in words (a refused lock file): the runs' alerts still go out
        LOG.error("queued changes and removed items could not be settled: %s", exc)
        return []
    except Exception:  # the runs' own alerts must still go out
        LOG.exception("queued changes and removed items could not be settled; the next run tries again")
        return []


def run_once(config: Config, store: StateStore, sink: ResultSink, registry: Registry, *,
             due_only: bool = False, env: Mapping[str, str] | None = None, uid: int | None = None,
             clock: Callable[[], float] = time.time, tz: tzinfo | None = None,
             owns_state: bool = True, lock_held: bool = False) -> OnceReport:
    """`owns_state`: `store` is the live database (not a private scratch one), so the run
    settles the lifecycle like a tick; `lock_held`: the caller holds the scheduler lock."""
    # A full or broken state directory must not cost the run its report (nor give a traceback).
    records = GuardedRecords(store, _StateTrouble())
    now = clock()
    cutoff = now - config.scheduler.log_retention
    prune_files(config.scheduler.state_dir / RUNS_DIR, cutoff)
    prune_files(config.scheduler.state_dir / SCHEDULER_LOGS, cutoff)
    records.prune(cutoff)
    items, refused = all_items(config, registry, uid)
    chosen = due_items(items, records.anchors(), now, tz or get_localzone()) if due_only \
        else list(items.values())
    done: queue.Queue[LoopEvent] = queue.Queue()
    runner = Runner(config, store, records, done, None, env, clock)
    skipped = runner.start(chosen, now, {i.id: now for i in chosen})
    finished: list[tuple[FinishedRun, Item]] = []
    try:
        while len(finished) < len(chosen) - len(skipped):
            event = done.get()
            if isinstance(event, Finished):  # the only kind a Runner puts; a Due comes from APScheduler
                finished.append((event.run, event.item))
    except KeyboardInterrupt:
        runner.stop(0.0)  # drop-ins run in sessions of their own: kill them, not orphan them
        raise
    records.finished([run for run, _ in finished])
    outcomes = [item.outcome(run.result, _dt(run.started), _dt(run.finished), run.log)
                for run, item in finished if run.result is not None]
    # Drop-ins that will never run: told once (the lifecycle dedupes), like any item.
    outcomes += refusal_outcomes([r for r in refused if not r.path.startswith('check "')], (),
                                 _dt(now))
    try:
        if owns_state:
            outcomes += _settle_if_owner(store, config.scheduler.state_dir, items, refused, clock(),
                                         lock_held)
        if outcomes:
            sink.handle(outcomes, _dt(clock()))
        sink.flush(_dt(clock()), force=True)
    except StateUnavailable as exc:
        LOG.error("%s: alerts of this run were not recorded or sent", exc)
    metrics.write_tick(config.scheduler.metrics_dir, store, clock())   # cron-run --once too
    runs = sorted((run for run, _ in finished), key=lambda r: r.item)
    return OnceReport(tuple(runs), tuple(refused), tuple(skipped))


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)
