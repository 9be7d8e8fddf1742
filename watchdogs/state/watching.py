"""Is anyone watching? One pure judgement, shared by `watchdogs status` (its Nagios code) and
the status page, from what the state records and what Slurm lists.

The watchdog lives in the queue it watches: between two instances, or when its chain was
cancelled, nothing checks anything. That state must never read as OK (issue 34). `judge`
is given every input (the clock too) and answers one `Watching`:

- watching (OK): an instance ticked within its period plus a short grace;
- goes blind (WARNING): it ticks, but its time limit is near and no successor runs yet;
- handing over / starting (OK, then CRITICAL): a chain job runs and has not ticked yet;
- not ticking (CRITICAL): an instance claims to run but its heartbeat is old (frozen, or it
  cannot write its state);
- blind (WARNING for one period plus the grace, then CRITICAL): no instance runs and none is
  about to: since when, and why (the successor's pending reason and Slurm's expected start,
  or nothing queued at all);
- stopped / stopping (WARNING): `watchdogs stop` on purpose. Not blind, because someone
  chose it, but not OK either: nothing is watched, and a monitor that shows OK for a
  stopped watchdog forgets it was stopped. WARNING says it without paging anyone at night;
- never started (CRITICAL): nothing was ever recorded here and nothing is queued.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from watchdogs.result import Status
from watchdogs.units import format_duration

PERIODIC_HOMES = ("scrontab", "cron", "timer")
"""Homes that start one short run per period (`run --once --due --home KIND`): each run
records an instance that ends, so an ended instance is normal there."""
STOP_MARGIN_S = 120.0
"""cron-scheduler.slurm's `--signal=B:USR1@120`: a chain instance stops watching this long
before its job's EndTime."""
WARN_BEFORE_S = 900.0
"""Say "goes blind" this long before watching stops with no successor running (the
scheduler's own WARNING alert uses `handover_warn`, whose default this is)."""
GRACE_FLOOR_S = 60.0
"""The least grace on top of a period: a tick runs late by a slow channel (a dead SMTP
server costs its timeout) or a busy node, and a false CRITICAL teaches people to ignore it."""
LIVE = ("RUNNING", "CONFIGURING")
"""Slurm states of a job whose instance may be alive (COMPLETING is ending)."""


@dataclass(frozen=True)
class ChainJob:
    """One of the chain's jobs as squeue lists it."""

    job_id: str
    state: str
    reason: str = ""
    start: float | None = None
    """%S: Slurm's expected start while pending, the real start once running."""
    end: float | None = None
    """%e: the time limit once running."""
    submitted: float | None = None
    role: str = ""
    """"next", "rescue" or "start" (`--comment watchdogs:<role>:...`); "" when unknown."""


@dataclass(frozen=True)
class Instance:
    """The latest scheduler instance the state records (not `run --once`)."""

    job_id: str | None
    mode: str
    host: str
    pid: int | None
    started: float
    heartbeat: float | None
    ended: float | None
    reason: str | None

    @property
    def last_seen(self) -> float:
        return self.heartbeat or self.started

    @property
    def where(self) -> str:
        return f"job {self.job_id}" if self.job_id else f"pid {self.pid}"


@dataclass(frozen=True)
class Watching:
    state: str
    """"watching", "goes blind", "handing over", "starting", "not ticking", "blind",
    "stopping", "stopped", "never started"."""
    status: Status
    headline: str
    """Short, for the Nagios line: "scheduler BLIND since 14:00 (7m): ..."."""
    why: str
    """The whole sentence: what, since when, why, and what to do."""
    since: float | None = None
    """Since when nothing watches (blind, stopped, not ticking); None while watching."""
    until: float | None = None
    """When watching stops (the running instance's time limit), when known."""
    limit: float = 0.0
    """Seconds a tick may be late before it counts: the period plus the grace."""

    def blind_for(self, now: float) -> float:
        return max(0.0, now - self.since) if self.since is not None else 0.0


def grace(period: float) -> float:
    return max(period, GRACE_FLOOR_S)


def late_after(period: float, stale_after: float) -> float:
    """How old the last tick may be: the period and a short grace; never more than
    `heartbeat_stale`, the user's own outer bound (a test or a strict site lowers it)."""
    return min(period + grace(period), stale_after)


def clock(ts: float) -> str:
    """14:05 today, else 2026-11-27 14:05 (local time, as squeue prints it)."""
    when, today = datetime.fromtimestamp(ts), datetime.now()
    return when.strftime("%H:%M" if when.date() == today.date() else "%Y-%m-%d %H:%M")


def _dur(seconds: float) -> str:
    return format_duration(max(0.0, seconds))


def describe_job(job: ChainJob) -> str:
    """"job 123 PENDING (Priority), Slurm expects it at 14:05"."""
    text = f"job {job.job_id} {job.state}"
    if job.state == "PENDING":
        text += f" ({job.reason})" if job.reason else ""
        text += (f", Slurm expects it at {clock(job.start)}" if job.start is not None else
                 ", Slurm gives no expected start")
    return text


def judge(latest: Instance | None, jobs: Sequence[ChainJob] | None, now: float, period: float,
          stale_after: float, stopped_since: float | None = None, slurm_error: str | None = None,
          warn_before: float = WARN_BEFORE_S, unread: str | None = None) -> Watching:
    """Pure. `jobs`: the chain's jobs (finished ones the controller remembers may be among
    them), None when Slurm was not asked (the status page) or could not answer
    (`slurm_error` says why). `period`: the tick of a chain or foreground scheduler, the
    home's period for a periodic home. `stopped_since`: when `watchdogs stop` made the stop
    file, None when there is none. `unread`: why the state could not be read (then `latest`
    is None because it is not known, not because nothing ran)."""
    limit = late_after(period, stale_after)
    by_id = {j.job_id: j for j in jobs or ()}
    own = by_id.get(latest.job_id or "") if latest else None
    gone = _gone_in_slurm(latest, own, jobs)
    ticking = latest is not None and (latest.ended is None or latest.mode in PERIODIC_HOMES) and not gone
    age = now - latest.last_seen if latest else None
    if stopped_since is not None:
        return _stopped(latest, own, ticking and age is not None and age <= limit, stopped_since, limit)
    others = [j for j in jobs or () if latest is None or j.job_id != latest.job_id]
    if latest is not None and ticking and age is not None and latest.mode in PERIODIC_HOMES:
        if age <= limit:
            return Watching("watching", Status.OK, "scheduler running",
                            f"the {latest.mode} home runs every {_dur(period)}; last run {_dur(age)} ago",
                            limit=limit)
        return _blind(latest.last_seen + period, f"no run of the {latest.mode} home since "
                      f"{clock(latest.last_seen)} (it runs every {_dur(period)}): is its entry still "
                      f"installed? `watchdogs doctor` says which homes work here", now, limit)
    if latest is not None and ticking and age is not None:
        if age > limit:
            return _not_ticking(latest, own, age, period, stale_after, limit)
        return _watching(latest, own, others, now, limit, warn_before)
    return _nobody(latest, gone, own, others, jobs is None, slurm_error, now, limit, unread)


def _gone_in_slurm(latest: Instance | None, own: ChainJob | None, jobs: Sequence[ChainJob] | None) -> bool:
    """Slurm answered and no longer runs the instance's job: it ended without a word (a
    SIGKILL, a node failure). A pid instance, or no answer from Slurm, stays as recorded."""
    if latest is None or latest.ended is not None or not latest.job_id or jobs is None:
        return False
    return own is None or own.state not in LIVE


def _stopped(latest: Instance | None, own: ChainJob | None, alive: bool, since: float,
             limit: float) -> Watching:
    if alive and latest is not None:
        return Watching("stopping", Status.WARNING, "scheduler stopping (`watchdogs stop`)",
                        f"STOPPING (`watchdogs stop`): {latest.where} on {latest.host} ends at its next "
                        "tick; no successor and no run is coming (`watchdogs start` resumes the chain)",
                        since=since, limit=limit)
    return Watching("stopped", Status.WARNING, "scheduler stopped by `watchdogs stop`",
                    f"STOPPED by `watchdogs stop` at {clock(since)}: nothing is watched, no instance runs "
                    "and no run is coming (`watchdogs start` resumes the chain)", since=since, limit=limit)


def _watching(latest: Instance, own: ChainJob | None, others: Sequence[ChainJob], now: float, limit: float,
              warn_before: float) -> Watching:
    until = own.end - STOP_MARGIN_S if own is not None and own.end is not None else None
    running = [j for j in others if j.state in LIVE]
    if until is not None and until - now <= warn_before and not running:
        queued = [j for j in others if j.state == "PENDING"]
        successor = (f"successor {describe_job(queued[0])}" if queued else
                     "no successor is queued (`watchdogs start` queues one)")
        left = _dur(until - now)
        return Watching("goes blind", Status.WARNING,
                        f"scheduler running; goes BLIND at {clock(until)} (in {left}): {successor}",
                        f"{latest.where} stops watching at {clock(until)} (its time limit), in {left}, "
                        f"and no successor runs yet: {successor}; nothing is checked from then until one "
                        "starts (`watchdogs doctor` lists partitions and homes that start sooner)",
                        until=until, limit=limit)
    return Watching("watching", Status.OK, "scheduler running",
                    f"{latest.where} on {latest.host} ticked {_dur(now - latest.last_seen)} ago",
                    until=until, limit=limit)


def _not_ticking(latest: Instance, own: ChainJob | None, age: float, period: float, stale_after: float,
                 limit: float) -> Watching:
    state = f" ({own.state})" if own is not None else ""
    if age > stale_after:
        head = f"scheduler HEARTBEAT STALE: last tick {_dur(age)} ago"
        why = (f"HEARTBEAT STALE: last tick {_dur(age)} ago (limit {_dur(stale_after)}): "
               f"{latest.where}{state} on {latest.host} is NOT running. "
               "See its log, `squeue`, then `watchdogs start`.")
    else:
        head = f"scheduler NOT TICKING: last tick {_dur(age)} ago (tick {_dur(period)})"
        why = (f"NOT TICKING: {latest.where}{state} on {latest.host} claims to run but its last tick was "
               f"{_dur(age)} ago (tick {_dur(period)}, limit {_dur(limit)}): it is frozen, or it cannot "
               "write or publish its state; nothing is checked meanwhile. See its log.")
    return Watching("not ticking", Status.CRITICAL, head, why, since=latest.last_seen, limit=limit)


def _nobody(latest: Instance | None, gone: bool, own: ChainJob | None, others: Sequence[ChainJob],
            unasked: bool, slurm_error: str | None, now: float, limit: float, unread: str | None) -> Watching:
    """No instance ticks: someone is about to (a chain job runs and has not ticked yet), or
    nobody is (blind)."""
    running = sorted((j for j in others if j.state in LIVE), key=lambda j: j.start or 0.0)
    if running:
        job = running[-1]
        began = job.start if job.start is not None else now
        kind = "handing over" if latest is not None else "starting"
        if now - began <= limit:
            return Watching(kind, Status.OK, f"scheduler {kind} (job {job.job_id})",
                            f"job {job.job_id} runs since {clock(began)} and takes over at its first tick",
                            limit=limit)
        return Watching("blind", Status.CRITICAL,
                        f"scheduler BLIND since {clock(began)}: job {job.job_id} runs but never ticked",
                        f"BLIND since {clock(began)} ({_dur(now - began)}): job {job.job_id} runs but has "
                        "not ticked: it cannot take over the state (see its log in the state folder's "
                        "scheduler/)", since=began, limit=limit)
    queued = sorted((j for j in others if j.state == "PENDING"), key=lambda j: j.start or float("inf"))
    # The Slurm error itself is on status's Slurm line; here only what it leaves unknown.
    asked = ("" if not unasked else "Slurm could not be asked whether a successor is queued" if slurm_error
             else "Slurm was not asked whether a successor is queued (`watchdogs status` asks)")
    if latest is None and unread is not None:
        return Watching("unknown", Status.UNKNOWN, "scheduler unknown (its state cannot be read)",
                        f"cannot tell whether an instance ticks: {unread}", limit=limit)
    if latest is None:
        if queued:
            job = queued[0]
            since = job.submitted if job.submitted is not None else now
            why = f"not watching yet: the first instance, {describe_job(job)}"
            return _blind(since, why, now, limit)
        why = "no scheduler has ever run here and none is queued: run `watchdogs start`"
        if unasked:
            why = f"no scheduler has run here: run `watchdogs start` ({asked})"
        return Watching("never started", Status.CRITICAL, "scheduler never started: nothing watches",
                        f"NOT WATCHING: {why}", limit=limit)
    since = latest.last_seen if gone or latest.ended is None else latest.ended
    ended = (f"{latest.where} ended at {clock(since)} without recording its end (Slurm: "
             f"{own.state if own else 'no longer listed'})" if gone else
             f"{latest.where} ended at {clock(since)}: {latest.reason or 'no reason recorded'}")
    if queued:
        why = f"{ended}; successor {describe_job(queued[0])}"
    elif unasked:
        why = f"{ended}; {asked}"
    else:
        why = f"{ended}; chain cancelled, nothing queued: run `watchdogs start`"
    return _blind(since, why, now, limit)


def _blind(since: float, why: str, now: float, limit: float) -> Watching:
    """One period plus the grace is a handover's ordinary gap: WARNING; longer, CRITICAL."""
    status = Status.CRITICAL if now - since > limit else Status.WARNING
    return Watching("blind", status, f"scheduler BLIND since {clock(since)} ({_dur(now - since)}): {why}",
                    f"BLIND since {clock(since)} ({_dur(now - since)}): {why}; nothing is checked until an "
                    "instance runs", since=since, limit=limit)
