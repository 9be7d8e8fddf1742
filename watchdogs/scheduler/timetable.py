"""When each item runs: the items of the config and of cron.d as APScheduler jobs, kept in
step with every rescan. The loop (watchdogs.scheduler.loop) decides what runs together;
this decides *when*, and says when an item is due.

A rescan adds new items, drops removed ones and reschedules changed ones; a refused drop-in
is logged once and told as an alert (watchdogs.scheduler.refusals), and an item that left
the config or cron.d closes its open alert. Both come back from `sync` as outcomes for the
loop to deliver with the rest of its tick.

APScheduler's defaults are wrong here: misfire_grace_time=1s silently drops a run that is
a little late. Jobs use misfire_grace_time=None (a late run still runs), coalesce=True
(a backlog runs once) and max_instances=1; catch-up after a gap comes from the last
completed run in the state database (`first_run`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING

from apscheduler.events import EVENT_JOB_SUBMITTED, JobSubmissionEvent
from apscheduler.executors.debug import DebugExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from watchdogs.scheduler.inbox import removed_items
from watchdogs.scheduler.items import Item, check_items, dropin_items
from watchdogs.scheduler.refusals import refusal_outcomes
from watchdogs.schedules import first_run, make_trigger

if TYPE_CHECKING:
    from watchdogs.config.model import Config
    from watchdogs.dropins.safety import Refusal
    from watchdogs.plugins import Registry
    from watchdogs.scheduler.records import Records
    from watchdogs.sink import ItemOutcome

LOG = logging.getLogger("watchdogs.scheduler")


def _noop() -> None:
    """The APScheduler job body: the work is started by the loop on the submission event."""


class Timetable:
    def __init__(self, config: Config, registry: Registry, records: Records, tz: tzinfo,
                 on_due: Callable[[str, float], None], *, uid: int | None = None,
                 resolve_removed: bool = False) -> None:
        """`on_due(item_id, scheduled)`: called from APScheduler's thread when an item is due.
        `resolve_removed`: this instance owns the state database, so it closes the open
        alerts of removed items."""
        self.config = config
        self.records = records
        self.tz = tz
        self.uid = uid
        self.items: dict[str, Item] = {}
        self.refused: list[Refusal] = []
        self._on_due = on_due
        self._resolve = resolve_removed
        self._known: set[str] | None = None
        self._warned: set[str] = set()
        self._refused_paths: set[str] = set()
        self._checks, self._check_refusals = check_items(config, registry)
        self._aps = BackgroundScheduler(timezone=timezone.utc, executors={"default": DebugExecutor()},
                                        job_defaults={"misfire_grace_time": None, "coalesce": True,
                                                      "max_instances": 1})
        self._aps.add_listener(self._on_submitted, EVENT_JOB_SUBMITTED)

    def start(self) -> None:
        self._aps.start()

    def shutdown(self) -> None:
        self._aps.shutdown(wait=False)

    def next_run(self, item_id: str) -> float | None:
        job = self._aps.get_job(item_id)
        return job.next_run_time.timestamp() if job is not None and job.next_run_time else None

    def sync(self, now: float) -> list[ItemOutcome]:
        """Rescan cron.d: add new items, drop removed ones, reschedule changed ones. What to
        tell: refused drop-ins (and fixed ones), and the removed items' closed alerts."""
        dropins, refused = dropin_items(self.config, self.uid)
        self.refused = self._check_refusals + refused
        for refusal in self.refused:
            if str(refusal) not in self._warned:
                self._warned.add(str(refusal))
                LOG.warning("refused: %s", refusal)
        told = refusal_outcomes(refused, self._refused_paths, _dt(now))
        self._refused_paths = {r.path for r in refused}
        wanted = {i.id: i for i in self._checks + dropins}
        for item_id in set(self.items) - set(wanted):
            LOG.info("%s: gone from cron.d; no longer scheduled", item_id)
            self.items.pop(item_id)
            if self._aps.get_job(item_id):
                self._aps.remove_job(item_id)
        changed = [i for i in wanted.values()
                   if i.id not in self.items or self.items[i.id].signature != i.signature]
        anchors = self.records.anchors() if changed else {}
        for item in changed:
            self._schedule(item, anchors.get(item.id), now)
        self.items.update(wanted)
        return [*told, *self._resolve_removed(now)]

    def _resolve_removed(self, now: float) -> list[ItemOutcome]:
        """An item that left the config (or cron.d) closes its open alert, with that reason."""
        known = set(self.items)
        if not self._resolve or known == self._known:
            return []
        self._known = known
        try:
            made = removed_items(self.records.store, known, [r.path for r in self.refused], now)
        except Exception:
            LOG.exception("cannot look for alerts of removed items")
            return []
        for outcome in made:
            LOG.info("%s: %s: its open alert is resolved", outcome.item, outcome.result.summary)
        return list(made)

    def _schedule(self, item: Item, anchor: float | None, now: float) -> None:
        first = first_run(item.schedule, _dt(anchor) if anchor else None, _dt(now), self.tz)
        self.records.register(item.id, item.kind, item.schedule.describe())
        self._aps.add_job(_noop, make_trigger(item.schedule, first, self.tz), id=item.id, name=item.id,
                          next_run_time=first, replace_existing=True)
        LOG.debug("%s: %s, next run %s", item.id, item.schedule.describe(), first.isoformat())

    def _on_submitted(self, event: JobSubmissionEvent) -> None:
        """APScheduler's thread: the item is due. Only say so; the loop runs it."""
        self._on_due(event.job_id, event.scheduled_run_times[-1].timestamp())


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)
