"""The chain's successors: secured at an instance's start (with crash-loop backoff), kept
queued while it runs (someone may scancel a pending one, an admin may move the time limit),
cancelled when the stop file ends the chain on purpose. Near the time limit the keeper
looks more often, and warns once when the next has not started in time: the watchdog is
about to go blind, and says so before it does."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from watchdogs import units
from watchdogs.errors import WatchdogsError
from watchdogs.scheduler import chain
from watchdogs.scheduler.records import Records
from watchdogs.slurmctl.runner import SlurmRunner, run_slurm

LOG = logging.getLogger("watchdogs.scheduler")
RETRY_S = 30.0
"""How soon a failed successor check is retried; also how often it looks inside the warning window."""

OnBlind = Callable[[datetime, str], None]
"""(when watching stops, "successor job N PENDING (Priority), Slurm expects 15:10")."""


def stops_at(own: chain.ChainJob | None) -> datetime | None:
    """When this instance stops watching: the time limit's USR1, local time as Slurm's."""
    end = chain.slurm_time(own.end) if own is not None else None
    return end - timedelta(seconds=chain.USR1_MARGIN_S) if end is not None else None


def pending_words(found: chain.Successors) -> str:
    job = found.next or found.rescue
    if job is None:
        return "no successor is queued"
    expected = chain.slurm_time(job.start)
    expects = (f", Slurm expects it at {expected:%H:%M}" if expected is not None
               else ", Slurm gives no start time")
    return f"successor job {job.id} {job.state} ({job.reason}){expects}"


def warn_due(found: chain.Successors, now: datetime, warn: float) -> datetime | None:
    """Pure: when watching stops, if the warning is due now (the window is open, no
    successor runs, and the next is eligible: a next still waiting for its begin time has
    had no chance yet; with a short life the window would otherwise open before it), else
    None."""
    stops = stops_at(found.own)
    if stops is None or found.newer_running is not None:
        return None
    if found.next is not None and found.next.reason == "BeginTime":
        begins = chain.slurm_time(found.next.start)
        if begins is None or now < begins:
            return None
    return stops if now >= stops - timedelta(seconds=warn) else None


class SuccessorKeeper:
    """Makes sure a next and a rescue are queued: at start, then every chain.RECHECK_S (every
    RETRY_S within the warning window and after a failure)."""

    def __init__(self, settings: chain.ChainSettings, job_id: str | None, delay: float,
                 env: Mapping[str, str], runner: SlurmRunner = run_slurm) -> None:
        self.settings = settings
        self.runner = runner
        self.job_id = job_id
        self.delay = delay
        self.env = env
        self.next_check = 0.0
        self.secured = False
        self.found: chain.Successors | None = None
        self.on_blind: OnBlind | None = None
        """Set once the channels exist: called once when the warning is due."""
        self.warned = False

    def __call__(self, now: float) -> None:
        if now < self.next_check:
            return
        self.next_check = now + RETRY_S
        script = chain.own_script(self.job_id, self.env, self.runner)
        local = datetime.fromtimestamp(now)  # Slurm's times are local and naive
        found = chain.keep_successors(self.settings, self.job_id, script, self.delay, self.env, self.runner,
                                      lead=self.settings.lead if self.job_id else None, now=local)
        if found.done != (self.found.done if self.found else None):
            LOG.info("chain: %s", found.done)
        self.found, self.secured = found, True
        self.warn_if_due(now)
        warn = min(self.settings.warn, self.settings.lead)
        window = stops_at(found.own)
        near = window is not None and (window - timedelta(seconds=warn)).timestamp() - now < chain.RECHECK_S
        self.next_check = now + (RETRY_S if near else chain.RECHECK_S)

    def warn_if_due(self, now: float) -> None:
        """Once: the WARNING, from the last look (also right after the channels exist)."""
        if self.found is None or self.warned or self.on_blind is None:
            return
        stops = warn_due(self.found, datetime.fromtimestamp(now), min(self.settings.warn, self.settings.lead))
        if stops is not None:
            self.warned = True
            self.on_blind(stops, pending_words(self.found))

    def try_now(self, now: float) -> None:
        try:
            self(now)
        except WatchdogsError as exc:
            LOG.error("chain: cannot make sure a successor is queued (retried in %.0fs): %s", RETRY_S, exc)

    def successor_running(self) -> chain.ChainJob | None:
        return self.found.newer_running if self.found is not None else None


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
    """The stop file ends the chain on purpose: the queued successors go too."""
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
