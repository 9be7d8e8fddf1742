"""One scheduler instance from start to exit: the stop file, the handover from a
predecessor still running, the instance record, the chain's successors (with crash-loop
backoff), the config, the loop, and the end record.

Order matters: the handover comes *before* the state database is opened (one writer, on
any filesystem), and the successors are secured *before* the config is loaded, so a broken
config still leaves a (backed-off) successor and the chain recovers once the config is fixed.
"""
from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path

from watchdogs import ownfiles, units
from watchdogs.alerts import build_guarded_sink, selfalerts
from watchdogs.alerts.guarded import GuardedSink
from watchdogs.config.model import SchedulerSettings
from watchdogs.errors import WatchdogsError
from watchdogs.fsprobe.answers import SCHEDULER_S, unanswered
from watchdogs.plugins import CHECKS_GROUP, Registry, load_group
from watchdogs.scheduler import chain, handover, remedies, startup
from watchdogs.scheduler.chores import Periodic
from watchdogs.scheduler.deadman import DeadMansSwitch
from watchdogs.scheduler.lastword import LastWord
from watchdogs.scheduler.lock import Lock, wait_for_holder
from watchdogs.scheduler.loop import Scheduler
from watchdogs.scheduler.publish import StateOwner
from watchdogs.scheduler.records import Records
from watchdogs.scheduler.stopflag import StopFlag, is_handover
from watchdogs.scheduler.successor import (
    RETRY_S,
    OnBlind,
    SuccessorKeeper,
    cancel_successors,
    pending_words,
    secure_successor,
)
from watchdogs.sink import ItemOutcome
from watchdogs.slurmctl.runner import SlurmRunner, run_slurm
from watchdogs.state import locking
from watchdogs.state.store import CORRUPT, StateStore, state_problem

LOG = logging.getLogger("watchdogs.scheduler")


def run_instance(config_path: Path, *, chained: bool, stop: StopFlag, registry: Registry | None = None,
                 env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.time,
                 runner: SlurmRunner = run_slurm) -> int:
    """Returns the process exit code. `chained`: an instance of the Slurm job chain; its
    successor is looked for, submitted and cancelled through `runner`."""
    env = dict(os.environ if env is None else env)
    registry = registry or load_group(CHECKS_GROUP)
    settings = chain.lenient_settings(config_path, env)
    job_id = env.get("SLURM_JOB_ID") or None
    if _state_hung(settings, job_id, chained, env, runner, clock):
        return 3
    if settings.stop_file.exists():
        LOG.warning("stop file %s exists: not starting%s (`watchdogs start` removes it)", settings.stop_file,
                    " and submitting no successor" if chained else "")
        return 0 if chained else 1
    if chained and job_id and not _submitted_by_hand(settings, env):
        taken = handover.take_over(settings, job_id, env, runner)
        if not taken.go_on:
            LOG.warning("%s: this instance ends (nothing written)", taken.why)
            return 0
    startup.remove_scratch(own_only=False)  # left by an instance that was SIGKILLed
    state = startup.open_state(settings.state_dir)
    locks = locking.probe(settings.state_dir)
    if not locks.across_hosts:
        LOG.warning("state folder %s: %s", settings.state_dir, locks.note)
    records = Records(state.store)
    instance = _begin(records, clock(), job_id, "chain" if chained else "foreground")
    keeper = secure_successor(settings, records, instance, job_id, env, clock, runner) if chained else None
    if keeper is not None and keeper.secured and _submitted_by_hand(settings, env):
        reason = (f"handover: submitted by hand as {env.get('SLURM_JOB_NAME')!r}; the chain goes on as "
                  f"{settings.job_name!r} with its log in {settings.output_dir}")
        LOG.warning("%s", reason)
        _end(records, instance, clock(), reason)
        return 0
    if chained and job_id:
        _log_where_start_does(settings, job_id)
    lock = Lock(settings.state_dir if state.problem is None else state.store.state_dir)
    holder = _take_lock(lock, f"job {job_id}" if job_id else "watchdogs run")
    if holder:
        LOG.error("another scheduler instance runs on %s: %s", settings.state_dir, holder)
        _end(records, instance, clock(), f"another instance holds the state: {holder}")
        return 1
    loaded = startup.load(config_path, settings.state_dir, registry)
    if not loaded.ok:
        return _config_failed(loaded, state, records, instance, lock, clock)
    assert loaded.config is not None
    config = loaded.config
    startup.remember(config.path, config.scheduler.state_dir, loaded)
    switch = _switch(config.scheduler)
    stores = startup.StoreSwitch(settings.state_dir, state)
    def on_change(kind: str | None, detail: str) -> None:
        _state_news(switch, kind, detail)
        stores(kind, detail)
    sink, disabled = build_guarded_sink(config, state.store if state.problem is None else None,
                                        disabled=loaded.disabled, problem=state.problem, on_change=on_change)
    now = _dt(clock())
    sink.handle(startup.news(loaded, config, list(sink.channels), disabled, now), now)
    if state.note:
        sink.direct.handle([selfalerts.state_broken(CORRUPT, state.note, str(settings.state_dir), now,
                                                    list(sink.channels))], now)
    gap = _gap(records, instance, clock(), config.scheduler.tick) if chained else None
    if chained:
        # Resolves a warning or last word of the chain; after a gap, says how long it was.
        sink.handle([selfalerts.watching_again(now, list(sink.channels), *_gap_words(gap))], now)
    sink.flush(now)  # news about the watchdog itself goes out now, not at the first tick
    switch.start(f"watchdogs instance {instance} starting on {socket.gethostname()}"
                 + (f" (job {job_id})" if job_id else ""))
    reason = "crashed"
    owner: StateOwner | None = None
    last_word = LastWord(settings, job_id, sink, lambda: list(sink.channels), switch, env, runner, clock)
    if keeper is not None:
        keeper.on_blind = _warner(sink, env, runner, clock)
        keeper.warn_if_due(clock())
    try:
        periodic = [Periodic(RETRY_S, keeper.try_now, "successor check")] if keeper else []
        def say(news: list[ItemOutcome]) -> None:
            sink.handle(news, _dt(clock()))
            sink.flush(_dt(clock()))
        watch = startup.ConfigWatch(config.path, settings.state_dir, registry, say,
                                    lambda: list(sink.channels))
        periodic.append(Periodic(0.0, watch, "config watch"))
        if state.problem is None:  # the page is read from and written to the state folder
            from watchdogs.report.refresh import PageRefresher

            periodic.append(Periodic(config.scheduler.tick, PageRefresher(config, state.store),
                                     "status page"))
        if switch.enabled:
            def ping(_now: float) -> None:
                switch.alive(_alive_body(instance, sink))
            periodic.append(Periodic(config.scheduler.heartbeat_every, ping, "dead man's switch"))
        def on_state_error(exc: BaseException, when: datetime) -> str | None:
            kind = sink.state_error(exc, when)
            if kind == CORRUPT and chained:
                # Connections in every thread point at the bad file: the successor (queued
                # already) starts at once, moves it aside and starts fresh.
                stop.raise_("state database corrupt: the next instance moves it aside", grace=30.0)
            return kind
        owner = StateOwner(settings.state_dir, f"chain instance {instance}" if chained else
                           f"scheduler instance {instance}", locks, lambda: scheduler.records.store,
                           on_state_error)
        _note_locks(state.store if state.problem is None else None, locks)
        scheduler = Scheduler(config, state.store, sink, registry, instance=instance, stop=stop,
                              periodic=periodic, env=env, clock=clock, on_state_error=on_state_error,
                              owner=owner, last_word=_last_word_for(last_word, stop, chained),
                              gap=gap[0] if gap else None)
        stores.target = scheduler
        reason = scheduler.run()
        if chained and is_handover(reason):
            reason = _handover_end(settings, job_id, switch, env, runner)
    except BaseException as exc:
        reason = f"crashed: {type(exc).__name__}: {exc}"
        switch.fail(f"watchdogs instance {instance} {reason}")
        raise
    finally:
        _end(records, instance, clock(), reason)
        if owner is not None:
            owner.publish(clock())  # `status` elsewhere sees this instance end
        lock.release()
        startup.remove_scratch()
        LOG.info("scheduler instance ended: %s", reason)
        switch.wait()
    if chained and (reason.startswith("stop file") or settings.stop_file.exists()):
        # Also after `watchdogs stop`'s scancel: a next queued under a job name the config
        # no longer gives would never be found by name, and would wait for its begin time.
        cancel_successors(settings, job_id, env, runner)
    return 0


GAP_GRACE_S = 5.0
"""A pause longer than two ticks and this between two instances is a gap worth telling."""


def _gap(records: Records, instance: int, now: float, tick: float) -> tuple[tuple[float, float], str] | None:
    """((from, to), why) when nothing watched for a while before this instance."""
    try:
        lives = records.lives_before(instance, limit=1)
    except Exception as exc:
        if state_problem(exc) is None:
            raise
        return None
    if not lives or now - lives[0].last_seen <= 2 * tick + GAP_GRACE_S:
        return None
    last = lives[0]
    job = f" (job {last.job_id})" if last.job_id else ""
    why = (f"the previous instance{job} ended: {last.reason}" if last.reason else
           f"the previous instance{job} ended without a word (killed, or its node failed)")
    return (last.last_seen, now), why


def _gap_words(gap: tuple[tuple[float, float], str] | None) -> tuple[tuple[datetime, datetime] | None, str]:
    if gap is None:
        return None, ""
    (start, end), why = gap
    return (_dt(start), _dt(end)), why


def _warner(sink: GuardedSink, env: Mapping[str, str], runner: SlurmRunner,
            clock: Callable[[], float]) -> OnBlind:
    """The WARNING before going blind, with what would help."""
    def warn(stops: datetime, successor: str) -> None:
        now = _dt(clock())
        helps = remedies.remedies(env.get("SLURM_JOB_PARTITION"), env, runner)
        found = selfalerts.goes_blind(stops.astimezone(timezone.utc), successor, helps, now,
                                      list(sink.channels))
        LOG.warning("%s", found.result.summary)
        sink.handle([found], now)
        sink.flush(now)
    return warn


def _last_word_for(last_word: LastWord, stop: StopFlag, chained: bool) -> Callable[[str], None]:
    """A chain instance says a last word on SIGTERM and unexpected signals. A foreground run
    only on unexpected ones: SIGTERM or Ctrl-C there is its own person or service manager."""
    def say(reason: str) -> None:
        if chained or stop.kind == "unexpected":
            last_word(reason)
    return say


def _handover_end(settings: chain.ChainSettings, job_id: str | None, switch: DeadMansSwitch,
                  env: Mapping[str, str], runner: SlurmRunner) -> str:
    """The end record's reason at a handover; when no successor runs (the time limit came
    first), the blindness is known now: the dead man's switch gets /fail."""
    try:
        found = chain.look(settings, job_id, env, runner)
    except WatchdogsError as exc:
        return f"handover (time limit near): the successor cannot be seen: {exc}"
    if found.newer_running is not None:
        return f"handover to job {found.newer_running.id}"
    words = pending_words(found)
    if found.next is not None:
        try:  # its begin may still lie ahead (an early USR1, a limit cut short): eligible now
            chain.release_now(found.next.id, env, runner)
        except WatchdogsError as exc:
            LOG.error("cannot release the next instance %s to start now: %s", found.next.id, exc)
    reason = f"handover (time limit near): {words}"
    switch.fail(f"watchdogs goes blind: {reason}; nothing is checked until the successor starts")
    return reason


def _submitted_by_hand(settings: chain.ChainSettings, env: Mapping[str, str]) -> bool:
    """`sbatch slurm/cron-scheduler.slurm` with a config naming another job_name: this job
    is not one of the chain (its successor, queued with the config's name, takes over)."""
    name = env.get("SLURM_JOB_NAME")
    return bool(name) and name != settings.job_name


def _log_where_start_does(settings: chain.ChainSettings, job_id: str) -> None:
    """Write to <state_dir>/scheduler/<job_name>-<job id>.out, as `watchdogs start` sets it
    up, also when the job was sbatch'ed by hand (slurm-N.out in the submit folder)."""
    target = settings.output_dir / f"{settings.job_name}-{job_id}.out"
    try:
        if Path(os.readlink("/proc/self/fd/1")) == target:
            return
        ownfiles.make_dirs(settings.output_dir)
        fd = ownfiles.create_private(target, append=True)
    except OSError as exc:
        LOG.warning("keeping this log here: cannot open %s: %s", target, exc.strerror)
        return
    LOG.info("this instance logs to %s from here on (the log folder from the config)", target)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _config_failed(loaded: startup.LoadedConfig, state: startup.State, records: Records, instance: int,
                   lock: Lock, clock: Callable[[], float]) -> int:
    """Say so through the last good channels and its dead man's switch, then end (the
    successor, queued already, backs off)."""
    count = len(loaded.problems)
    LOG.error("watchdogs cannot load its config (%d problem%s):\n  %s", count, "s" if count != 1 else "",
              "\n  ".join(loaded.problems))
    try:
        if loaded.config is None:
            LOG.error("no last good copy of the config in the state directory: nobody can be told "
                      "but this log (and Slurm mail, if configured)")
            return 2
        config = loaded.config
        switch = _switch(config.scheduler)
        switch.fail("watchdogs cannot load its config:\n" + "\n".join(loaded.problems))
        sink, disabled = build_guarded_sink(config, state.store if state.problem is None else None,
                                            disabled=loaded.disabled, problem=state.problem)
        now = _dt(clock())
        sink.handle(startup.news(loaded, config, list(sink.channels), disabled, now), now)
        sink.flush(now)
        switch.wait()
        return 2
    finally:
        _end(records, instance, clock(), f"config error ({count} problem{'s' if count != 1 else ''})")
        lock.release()


def _state_hung(settings: chain.ChainSettings, job_id: str | None, chained: bool, env: Mapping[str, str],
                runner: SlurmRunner, clock: Callable[[], float]) -> bool:
    """Every step of an instance reads or writes the state folder: on a hung mount the first
    would block in the kernel for good, a silent instance holding the chain's place. Said
    instead, and the chain goes on after the longest crash backoff (its crashes cannot be
    counted: they are recorded there); the dead man's switch, no longer pinged, tells someone."""
    if not unanswered([settings.state_dir], SCHEDULER_S):
        return False
    later = f", and its successors begin in {units.format_duration(chain.BACKOFF_CAP_S)}" if chained else ""
    LOG.error("state folder %s does not answer (a hung or dead mount?): nothing can be watched from it; "
              "this instance ends now (exit 3)%s", settings.state_dir, later)
    if chained:
        SuccessorKeeper(settings, job_id, chain.BACKOFF_CAP_S, env, runner).try_now(clock())
    return True


def _take_lock(lock: Lock, who: str) -> str | None:
    """The scheduler lock; a login-node command applying a change, or a home's run, holds it
    for a while (see watchdogs.scheduler.lock.wait_for_holder): wait that out rather than end
    the instance."""
    started = time.monotonic()
    told = ""
    while True:
        holder = lock.acquire(who)
        if not holder or time.monotonic() - started > wait_for_holder(holder):
            return holder
        if holder != told:
            LOG.info("the state is held by %s: waiting for it to end", holder.strip())
            told = holder
        time.sleep(0.2)


def _note_locks(store: StateStore | None, locks: locking.LockSupport) -> None:
    """What the filesystem gives for locks, for `status` (read from the view)."""
    if store is None:
        return
    try:
        store.kv_put("state", "locks", {"kind": locks.kind, "fstype": locks.fstype, "note": locks.note})
    except Exception as exc:
        if state_problem(exc) is None:
            raise


def _switch(settings: SchedulerSettings) -> DeadMansSwitch:
    return DeadMansSwitch(settings.heartbeat_url, suffixes=settings.heartbeat_suffixes,
                          proxy=settings.heartbeat_proxy)


def _state_news(switch: DeadMansSwitch, kind: str | None, detail: str) -> None:
    if kind is None:
        switch.alive(detail)
    else:
        switch.fail(f"state directory {kind}: {detail}")


def _alive_body(instance: int, sink: GuardedSink) -> str:
    state = "ok" if sink.problem is None else f"{sink.problem[0]}: {sink.problem[1]}"
    return (f"watchdogs instance {instance} on {socket.gethostname()} alive; channels: "
            f"{', '.join(sink.channels) or 'none'}; state directory: {state}")


def _begin(records: Records, now: float, job_id: str | None, mode: str) -> int:
    try:
        return records.begin_instance(now, job_id, mode)
    except Exception as exc:
        if state_problem(exc) is None:
            raise
        LOG.error("cannot record this instance in the state database: %s", exc)
        return 0


def _end(records: Records, instance: int, now: float, reason: str) -> None:
    try:
        records.end_instance(instance, now, reason)
    except Exception as exc:
        if state_problem(exc) is None:
            raise
        LOG.error("cannot record the end of this instance (%s): %s", reason, exc)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)
