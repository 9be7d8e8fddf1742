"""Start a batch of due items and report each finished run to a queue.

Built-in checks of one batch share one TickContext, so one squeue and one sinfo serve
them all. Every run lives in a daemon thread bounded by its timeout: a drop-in's process
group is killed at the timeout; a check that does not return is reported UNKNOWN and its
thread is left behind (Python cannot kill a thread) but it is not started again while
that thread is still alive, so a hung check costs one thread, not one per period.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from watchdogs import humanize
from watchdogs.checks.base import run_check
from watchdogs.checks.context import TickContext
from watchdogs.dropins.execute import SHUTDOWN, DropInProcess
from watchdogs.dropins.submit import (
    OwnJobsWatcher,
    my_active_jobs,
    still_active,
    submit,
    submitted_job,
)
from watchdogs.errors import WatchdogsError
from watchdogs.procs import children_hold
from watchdogs.result import CheckResult, Status
from watchdogs.scheduler.itemlock import ItemLocks, skip_reason
from watchdogs.scheduler.items import Item
from watchdogs.scheduler.prune import RUNS_DIR
from watchdogs.scheduler.records import Records
from watchdogs.scheduler.runs import FinishedRun

if TYPE_CHECKING:
    from watchdogs.config.model import Config
    from watchdogs.state.store import StateStore



@dataclass(frozen=True)
class Due:
    """On the loop's queue: APScheduler says `item` is due (at `scheduled`)."""

    item: str
    scheduled: float


@dataclass(frozen=True)
class Finished:
    """On the loop's queue: a run of `item` has finished (or timed out, or was skipped)."""

    run: FinishedRun
    item: Item


LoopEvent = Due | Finished
"""What the scheduler loop's one queue carries."""


@dataclass
class Run:
    item: Item
    started: float
    due: float | None = None
    done: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    process: DropInProcess | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    reported: bool = False


@dataclass(frozen=True)
class Skip:
    """An item that was due but not started, and why."""

    item: str
    reason: str

    def __str__(self) -> str:
        return f"{self.item}: {self.reason}"


def run_log_path(state_dir: Path, item_id: str, started: float) -> Path:
    stamp = datetime.fromtimestamp(started, timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    return state_dir / RUNS_DIR / item_id / f"{stamp}.log"


def dropin_env(base: Mapping[str, str], config: Config, item_id: str) -> dict[str, str]:
    """The scheduler's environment without its own job's SLURM_* variables (they would leak
    into jobs a drop-in submits, e.g. SLURM_CPUS_PER_TASK into their sruns), plus who we are."""
    env = {k: v for k, v in base.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    env.update(WATCHDOGS_ITEM=item_id, WATCHDOGS_CONFIG=str(config.path),
               WATCHDOGS_STATE_DIR=str(config.scheduler.state_dir))
    return env


class Runner:
    def __init__(self, config: Config, store: StateStore, records: Records, done: queue.Queue[LoopEvent],
                 instance: int | None, env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.records = records
        self.done = done
        self.instance = instance
        self.env = dict(os.environ if env is None else env)
        self.clock = clock
        self.running: dict[str, Run] = {}
        self.hung: dict[str, Run] = {}
        self.locks = ItemLocks(config.scheduler.state_dir)

    def start(self, items: Sequence[Item], now: float, due: Mapping[str, float] | None = None
              ) -> list[Skip]:
        """Start every item that is not already running, here or in another process on the
        same state dir; returns the items skipped because a run of theirs is still going
        (an item never overlaps itself). A check whose previous run never returned is
        reported UNKNOWN instead of being started again."""
        skipped, fresh = [], []
        for item in items:
            hung = self.hung.get(item.id)
            holder = None if item.id in self.running else self.locks.acquire(item.id, item.timeout)
            if item.id in self.running:
                skipped.append(Skip(item.id, "still running from its last due time"))
            elif holder is not None:
                skipped.append(Skip(item.id, skip_reason(holder)))
            elif hung is not None and hung.thread is not None and hung.thread.is_alive():
                since = humanize.moment_seconds(datetime.fromtimestamp(hung.started, timezone.utc))
                self.done.put(Finished(FinishedRun(item.id, item.kind, self.instance, now, now, CheckResult(
                    Status.UNKNOWN, f"previous run (started {since}) has not returned; not started again"),
                    due=(due or {}).get(item.id)), item))
                self.locks.release(item.id)
            else:
                self.hung.pop(item.id, None)
                fresh.append(item)
        if not fresh:
            return skipped
        self.records.started_many([(i.id, i.kind) for i in fresh], self.instance, now)
        ctx = TickContext(datetime.fromtimestamp(now, timezone.utc), self.store,
                          checks=[i.check for i in fresh if i.check is not None], env=self.env,
                          config=self.config, watchers=self._watchers(fresh))
        runs = {i.id: Run(i, now, (due or {}).get(i.id)) for i in fresh}
        self.running.update(runs)
        for run in runs.values():
            waits = [runs[r].done for r in run.item.references if r in runs]
            target = self._check_body if run.item.check else self._dropin_body
            run.thread = threading.Thread(target=target, args=(run, ctx, waits), daemon=True,
                                          name=f"run:{run.item.id}")
            run.thread.start()
        return skipped

    def _watchers(self, items: Sequence[Item]) -> list[object]:
        """A *.slurm drop-in with an earlier submission asks whether that job still runs:
        through the tick's one squeue, together with the `job` checks."""
        records = self.records.items()
        slurm = [i for i in items if i.kind == "slurm" and records.get(i.id, {}).get("last_job_id")]
        return [OwnJobsWatcher()] if slurm else []

    def settle(self, finished: FinishedRun) -> None:
        """Called by the scheduler loop for each finished run it takes off the queue."""
        run = self.running.pop(finished.item, None)
        if run is not None and run.item.check is not None and run.thread is not None \
                and run.thread.is_alive():
            self.hung[finished.item] = run  # timed out: its thread is still stuck in run()

    def busy(self) -> bool:
        return bool(self.running)

    def stop(self, wait: float) -> None:
        """Give running items up to `wait` seconds, then kill what is left: those runs are
        reported as interrupted (not run), and the next instance catches them up."""
        deadline = time.monotonic() + wait
        for run in list(self.running.values()):
            run.done.wait(max(0.0, deadline - time.monotonic()))
        for run in list(self.running.values()):
            if not run.done.is_set():
                if run.process is not None:
                    run.process.kill(SHUTDOWN)
                else:
                    self._finish(run, None)
        for run in list(self.running.values()):
            run.done.wait(10.0)

    # -- bodies (worker threads) ---------------------------------------------------------
    def _check_body(self, run: Run, ctx: TickContext, waits: list[threading.Event]) -> None:
        for event in waits:
            event.wait()  # checks this one refers to finish (or time out) first
        assert run.item.check is not None
        timer = threading.Timer(run.item.timeout, self._finish, args=(run, CheckResult(
            Status.UNKNOWN, f"did not finish within {humanize.duration(run.item.timeout)}")))
        timer.daemon = True
        timer.start()
        # Its Slurm commands (a resubmit's sbatch) hold the item's lock as the check does: an
        # sbatch orphaned by a crash keeps the item, so a restarted scheduler cannot submit twice.
        with children_hold(self.locks.holding(run.item.id)):
            result = run_check(run.item.check, ctx)
        timer.cancel()
        self._finish(run, result)

    def _dropin_body(self, run: Run, ctx: TickContext, waits: list[threading.Event]) -> None:
        dropin = run.item.dropin
        assert dropin is not None
        # The store's folder: the scratch one while the state directory is full (see Scheduler.use_store).
        log = run_log_path(self.store.state_dir, run.item.id, run.started)
        env = dropin_env(self.env, self.config, run.item.id)
        job_id = None
        result: CheckResult | None
        # Every child of the run inherits the item's lock: a scheduler SIGKILLed mid-run leaves
        # the drop-in (or its sbatch) running, and the lock held until it ends, so a restarted
        # scheduler does not start the item beside it. The lock's note names that child.
        holding = self.locks.holding(run.item.id)
        try:
            if dropin.submit:
                with children_hold(holding):
                    result, job_id = self._submit(run, ctx, log, env)
            else:
                run.process = DropInProcess(dropin.argv, run.item.timeout, log, env, log.parent,
                                            keep_fds=holding.fds, started=holding.started)
                result = run.process.run()
        except Exception as exc:  # noqa: BLE001 - a broken run must still be reported, not lost
            result = CheckResult(Status.UNKNOWN, f"internal error: {type(exc).__name__}: {exc}")
        self._finish(run, result, str(log), job_id)

    def _submit(self, run: Run, ctx: TickContext, log: Path, env: Mapping[str, str]
                ) -> tuple[CheckResult, str | None]:
        assert run.item.dropin is not None
        previous = self.records.items().get(run.item.id, {}).get("last_job_id")
        lost = self._unrecorded_job(log, previous)
        if lost is not None:
            # An sbatch orphaned by a crashed scheduler submitted this job after its
            # scheduler died (it held the item's lock until then): it is this item's job.
            self.records.note_job(run.item.id, lost)
            previous = lost
        if previous:
            try:
                active = my_active_jobs(ctx)
            except WatchdogsError as exc:
                return CheckResult(Status.UNKNOWN, f"cannot tell whether job {previous} still runs: "
                                   f"{exc}"), None
            waiting = still_active(previous, active)
            if waiting is not None:
                return waiting, None
        result, job_id = submit(run.item.dropin.argv, log, env)
        if job_id is not None:
            self.records.note_job(run.item.id, job_id)  # before the lock goes: no twin submission
        return result, job_id

    @staticmethod
    def _unrecorded_job(log: Path, recorded: str | None) -> str | None:
        """The job id the item's last sbatch wrote into its run log, when it is not the one
        recorded: that sbatch outlived the scheduler that started it."""
        earlier = sorted(p for p in log.parent.glob("*.log") if p.name < log.name)
        job = submitted_job(earlier[-1]) if earlier else None
        return job if job is not None and job != recorded else None

    def _finish(self, run: Run, result: CheckResult | None, log: str | None = None,
                job_id: str | None = None) -> None:
        """Report a run once: whichever comes first of its result and its timeout."""
        with run.lock:
            if run.reported:
                return
            run.reported = True
        self.done.put(Finished(FinishedRun(run.item.id, run.item.kind, self.instance, run.started,
                                           self.clock(), result, log, job_id, run.due), run.item))
        # A check cut off by its timeout frees its item here although its thread may still
        # be stuck; this process will not start it again meanwhile (see `hung`).
        self.locks.release(run.item.id)
        run.done.set()  # last: whoever waits on it (stop) finds the result already queued
