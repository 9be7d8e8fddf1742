"""One scheduler instance from start to exit: the stop file, the instance record, the
chain's successor (with crash-loop backoff), the config, the loop, and the end record.

Order matters: the successor is secured *before* the config is loaded, so a broken config
still leaves a (backed-off) successor and the chain recovers once the config is fixed.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from watchdogs import units
from watchdogs.alerts import build_sink
from watchdogs.config import load_config
from watchdogs.errors import ConfigError, WatchdogsError
from watchdogs.plugins import CHECKS_GROUP, Registry, load_group
from watchdogs.scheduler import chain
from watchdogs.scheduler.lock import Lock
from watchdogs.scheduler.loop import Periodic, Scheduler
from watchdogs.scheduler.records import Records
from watchdogs.scheduler.stopflag import StopFlag
from watchdogs.state.store import StateStore

LOG = logging.getLogger("watchdogs.scheduler")
RETRY_S = 30.0
"""How soon a failed successor check is retried."""


class SuccessorKeeper:
    """Makes sure a successor is queued: at start, then every chain.RECHECK_S (sooner after
    a failure), because someone may scancel the pending one."""

    def __init__(self, settings: chain.ChainSettings, job_id: str | None, delay: float,
                 env: Mapping[str, str]) -> None:
        self.settings = settings
        self.job_id = job_id
        self.delay = delay
        self.env = env
        self.next_check = 0.0

    def __call__(self, now: float) -> None:
        if now < self.next_check:
            return
        self.next_check = now + RETRY_S
        script = chain.own_script(self.job_id, self.env)
        done = chain.ensure_successor(self.settings, self.job_id, script, self.delay, self.env)
        LOG.info("chain: %s", done)
        self.next_check = now + chain.RECHECK_S

    def try_now(self, now: float) -> None:
        try:
            self(now)
        except WatchdogsError as exc:
            LOG.error("chain: cannot make sure a successor is queued (retried in %.0fs): %s", RETRY_S, exc)


def run_instance(config_path: Path, *, chained: bool, stop: StopFlag, registry: Registry | None = None,
                 env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.time) -> int:
    """Returns the process exit code. `chained`: an instance of the Slurm job chain."""
    env = dict(os.environ if env is None else env)
    registry = registry or load_group(CHECKS_GROUP)
    settings = chain.lenient_settings(config_path)
    if settings.stop_file.exists():
        LOG.warning("stop file %s exists: not starting%s (`watchdogs start` removes it)", settings.stop_file,
                    " and submitting no successor" if chained else "")
        return 0 if chained else 1
    store = StateStore(settings.state_dir)
    records = Records(store)
    job_id = env.get("SLURM_JOB_ID") or None
    instance = records.begin_instance(clock(), job_id, "chain" if chained else "foreground")
    keeper = _secure_successor(settings, records, instance, job_id, env, clock) if chained else None
    lock = Lock(settings.state_dir)
    holder = lock.acquire(f"job {job_id}" if job_id else "watchdogs run")
    if holder:
        LOG.error("another scheduler instance runs on %s: %s", settings.state_dir, holder)
        records.end_instance(instance, clock(), f"another instance holds the state: {holder}")
        return 1
    try:
        config = load_config(config_path, checks=registry)
    except ConfigError as exc:
        LOG.error("%s", exc)
        count = len(exc.problems)
        records.end_instance(instance, clock(), f"config error ({count} problem{'s' if count != 1 else ''})")
        return exc.exit_code
    reason = "crashed"
    try:
        periodic = [Periodic(RETRY_S, keeper.try_now, "successor check")] if keeper else []
        scheduler = Scheduler(config, store, build_sink(config, store), registry,
                              instance=instance, stop=stop, periodic=periodic, env=env, clock=clock)
        reason = scheduler.run()
    except BaseException as exc:
        reason = f"crashed: {type(exc).__name__}: {exc}"
        raise
    finally:
        records.end_instance(instance, clock(), reason)
        lock.release()
        LOG.info("scheduler instance ended: %s", reason)
    if chained and reason.startswith("stop file"):
        _cancel_successors(settings, job_id, env)
    return 0


def _secure_successor(settings: chain.ChainSettings, records: Records, instance: int, job_id: str | None,
                      env: Mapping[str, str], clock: Callable[[], float]) -> SuccessorKeeper:
    delay, streak = chain.crash_backoff(records.lives_before(instance))
    if delay:
        LOG.warning("chain: backing off: the last %d instances ended within %.0fs of starting; "
                    "the successor begins in %s instead of at once", streak, chain.YOUNG_S,
                    units.format_duration(delay))
    keeper = SuccessorKeeper(settings, job_id, delay, env)
    keeper.try_now(clock())
    return keeper


def _cancel_successors(settings: chain.ChainSettings, own: str | None, env: Mapping[str, str]) -> None:
    """The stop file ends the chain on purpose: the queued successor goes too."""
    jobs, error = chain.safe_chain_jobs(settings, env)
    if error:
        LOG.error("chain: cannot cancel the successor (it will exit at start): %s", error)
        return
    pending = [j.id for j in jobs if j.id != own]
    try:
        chain.cancel(pending, env)
    except WatchdogsError as exc:
        LOG.error("chain: cannot cancel %s (it will exit at start): %s", ", ".join(pending), exc)
        return
    if pending:
        LOG.info("chain: stop file: cancelled successor %s", ", ".join(pending))
