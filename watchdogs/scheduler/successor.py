"""The chain's successor: secured at an instance's start (with crash-loop backoff), kept
queued while it runs (someone may scancel the pending one), cancelled when the stop file
ends the chain on purpose."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from watchdogs import units
from watchdogs.errors import WatchdogsError
from watchdogs.scheduler import chain
from watchdogs.scheduler.records import Records
from watchdogs.slurmctl.runner import SlurmRunner, run_slurm

LOG = logging.getLogger("watchdogs.scheduler")
RETRY_S = 30.0
"""How soon a failed successor check is retried."""


class SuccessorKeeper:
    """Makes sure a successor is queued: at start, then every chain.RECHECK_S (sooner after
    a failure), because someone may scancel the pending one."""

    def __init__(self, settings: chain.ChainSettings, job_id: str | None, delay: float,
                 env: Mapping[str, str], runner: SlurmRunner = run_slurm) -> None:
        self.settings = settings
        self.runner = runner
        self.job_id = job_id
        self.delay = delay
        self.env = env
        self.next_check = 0.0
        self.secured = False

    def __call__(self, now: float) -> None:
        if now < self.next_check:
            return
        self.next_check = now + RETRY_S
        script = chain.own_script(self.job_id, self.env, self.runner)
        done = chain.ensure_successor(self.settings, self.job_id, script, self.delay, self.env, self.runner)
        LOG.info("chain: %s", done)
        self.secured = True
        self.next_check = now + chain.RECHECK_S

    def try_now(self, now: float) -> None:
        try:
            self(now)
        except WatchdogsError as exc:
            LOG.error("chain: cannot make sure a successor is queued (retried in %.0fs): %s", RETRY_S, exc)


def secure_successor(settings: chain.ChainSettings, records: Records, instance: int, job_id: str | None,
                      env: Mapping[str, str], clock: Callable[[], float], runner: SlurmRunner
                      ) -> SuccessorKeeper:
    delay, streak = chain.crash_backoff(records.lives_before(instance))
    if delay:
        LOG.warning("chain: backing off: the last %d instances ended within %.0fs of starting; "
                    "the successor begins in %s instead of at once", streak, chain.YOUNG_S,
                    units.format_duration(delay))
    keeper = SuccessorKeeper(settings, job_id, delay, env, runner)
    keeper.try_now(clock())
    return keeper


def cancel_successors(settings: chain.ChainSettings, own: str | None, env: Mapping[str, str],
                       runner: SlurmRunner) -> None:
    """The stop file ends the chain on purpose: the queued successor goes too."""
    jobs, error = chain.safe_chain_jobs(settings, env, runner)
    if error:
        LOG.error("chain: cannot cancel the successor (it will exit at start): %s", error)
        return
    pending = [j.id for j in jobs if j.id != own]
    try:
        chain.cancel(pending, env, runner)
    except WatchdogsError as exc:
        LOG.error("chain: cannot cancel %s (it will exit at start): %s", ", ".join(pending), exc)
        return
    if pending:
        LOG.info("chain: stop file: cancelled successor %s", ", ".join(pending))
