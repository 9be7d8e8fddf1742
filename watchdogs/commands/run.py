"""`watchdogs run`: the scheduler. In the foreground, as an instance of the Slurm job chain
(`--chain`, what slurm/cron-scheduler.slurm runs), or every item once (`--once [--due]`)."""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from watchdogs.alerts import build_sink, selfalerts
from watchdogs.commands.base import CommandResult
from watchdogs.config import Config, find_config_path, load_config
from watchdogs.errors import ConfigError, ConfigProblem, WatchdogsError
from watchdogs.fsprobe.answers import unanswered
from watchdogs.plugins import CHECKS_GROUP, load_group
from watchdogs.result import Status
from watchdogs.scheduler.chain import lenient_settings
from watchdogs.scheduler.changes import chain_state, owned_elsewhere, reader
from watchdogs.scheduler.deadman import DeadMansSwitch
from watchdogs.scheduler.home import HOME_KINDS, HOME_PERIOD_S, Turn, take_turn
from watchdogs.scheduler.instance import run_instance
from watchdogs.scheduler.once import run_once
from watchdogs.scheduler.records import Records
from watchdogs.scheduler.startup import (
    LoadedConfig,
    State,
    channel_reasons,
    load,
    news,
    open_state,
    publish_view,
    remember,
    remove_scratch,
    scratch_dir,
    tell_state,
)
from watchdogs.scheduler.stopflag import StopFlag
from watchdogs.sink import ItemOutcome, ResultSink
from watchdogs.state.store import StateStore, open_store, state_problem
from watchdogs.textsafe import one_line


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("run", help="run the scheduler: built-in checks and cron.d drop-ins",
                            description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true",
                      help="run every item once, print one line each, exit with the worst status "
                           "as a Nagios code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN)")
    mode.add_argument("--chain", action="store_true",
                      help="run as an instance of the self-perpetuating Slurm job "
                           "(keeps one successor queued; used by slurm/cron-scheduler.slurm)")
    parser.add_argument("--due", action="store_true", help="with --once: only the items that are due")
    parser.add_argument("--home", choices=HOME_KINDS,
                        help="with --once: the run a scrontab, crontab or systemd timer home makes each "
                             "minute (installed by `watchdogs start --home`): skipped while another home "
                             "or the chain holds the state, recorded as an instance, pings the dead man's "
                             "switch; exits 0 once the run is made (the channels carry its result)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> CommandResult:
    if args.due and not args.once:
        raise WatchdogsError("--due goes with --once")
    if args.home and not args.once:
        raise WatchdogsError("--home goes with --once")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # it logs every job submission
    if args.once:
        return _once(args)
    stop = StopFlag()
    stop.install()
    code = run_instance(find_config_path(args.config), chained=args.chain, stop=stop)
    return CommandResult("", {}, exit_code=code)


class QuietSink:
    """Records and sends nothing: `run --once` beside a scheduler on another host."""

    def handle(self, outcomes: Sequence[ItemOutcome], now: datetime) -> None:
        return

    def flush(self, now: datetime, force: bool = False) -> None:
        return


class Terminated(KeyboardInterrupt):
    """SIGTERM during `run --once`: stopped like Ctrl-C, so its drop-ins are killed (their
    process groups), never orphaned (they run in sessions of their own)."""


def _interrupt(signum: int, frame: object) -> None:
    raise Terminated()


def _tell_disabled(config: Config, sink: ResultSink, disabled: dict[str, list[str]]) -> None:
    if disabled:
        now = datetime.now(timezone.utc)
        working = [n.name for n in config.notifiers if n.enabled]
        sink.handle([selfalerts.channel_disabled(name, disabled[name], now, working)
                     for name in sorted(disabled)], now)


def _take_turn(config: Config, kind: str, elsewhere: str | None) -> Turn:
    if elsewhere:
        return Turn(None, f"another home holds the state: {elsewhere}; this run is skipped")
    settings = config.scheduler
    def alive() -> str | None:
        view = reader(settings.state_dir)
        try:
            chain = chain_state(config, view, time.time())
        finally:
            if view is not None:
                view.close()
        return chain.where if chain.alive else None
    return take_turn(settings.state_dir, settings.stop_file, kind, alive())


def _begin_home(store: StateStore, kind: str) -> int | None:
    """The run as an instance of mode KIND: `status` sees which home ticks, and when."""
    try:
        now = time.time()
        # What `status` needs to judge a home's silence: its period (a cron runs every minute).
        store.kv_put("state", "home", {"kind": kind, "period": HOME_PERIOD_S, "last_run": now,
                                       "host": socket.gethostname()})
        return Records(store).begin_instance(now, os.environ.get("SLURM_JOB_ID") or None, kind)
    except Exception as exc:
        if state_problem(exc) is None:
            raise
        return None


def _end_home(store: StateStore, instance: int, kind: str, worst: Status, config: Config) -> None:
    with contextlib.suppress(Exception):  # the record is for `status`; the run is done either way
        Records(store).end_instance(instance, time.time(), f"home run ({kind})")
    settings = config.scheduler
    switch = DeadMansSwitch(settings.heartbeat_url, suffixes=settings.heartbeat_suffixes,
                            proxy=settings.heartbeat_proxy)
    if switch.enabled:
        switch.alive(f"watchdogs {kind} run on {socket.gethostname()}: worst {worst.name}")
        switch.wait(10.0)


def _home_config_failed(path: Path, kind: str) -> CommandResult:
    """A home's run with a config that does not load: nobody reads a cron job's output, so
    the channels of the last good copy hear it (once; the lifecycle dedupes each minute's
    repeat) and the dead man's switch gets /fail. Without a last good copy, only the log."""
    settings = lenient_settings(path)
    loaded = load(path, settings.state_dir, load_group(CHECKS_GROUP))
    said = "; ".join(loaded.problems) or "it loads now"
    config = loaded.config
    if config is None:
        return CommandResult(f"CONFIG   {path} does not load: {said}; no last good copy in "
                             f"{settings.state_dir}: nobody can be told but this log", {}, exit_code=2)
    turn = _take_turn(config, kind, owned_elsewhere(config))
    if turn.skipped:
        return CommandResult(f"SKIPPED  {turn.skipped}", {"skipped": turn.skipped, "items": []})
    try:
        state = open_state(config.scheduler.state_dir)
        sink = build_sink(config, state.store)
        now = datetime.now(timezone.utc)
        working = [n.name for n in config.notifiers if n.enabled and n.name not in loaded.disabled]
        sink.handle(news(loaded, config, working, loaded.disabled, now)[:1], now)
        sink.flush(now, force=True)
        switch = DeadMansSwitch(config.scheduler.heartbeat_url, suffixes=config.scheduler.heartbeat_suffixes,
                                proxy=config.scheduler.heartbeat_proxy)
        if switch.enabled:
            switch.fail(f"watchdogs cannot load its config:\n{said}")
            switch.wait(10.0)
    finally:
        turn.release()
    return CommandResult(f"CONFIG   {path} does not load: {said}; told through the last good copy's "
                         "channels; no item ran", {"config_problems": list(loaded.problems)}, exit_code=2)


def _once(args: argparse.Namespace) -> CommandResult:
    # As the foreground scheduler does: a [[notify]] table with a problem (a secret file
    # others can read) disables that channel alone, and the other channels are told.
    broken: dict[str, list[ConfigProblem]] = {}
    path = find_config_path(args.config)
    try:
        config = load_config(path, broken_channels=broken, answers=unanswered)
    except ConfigError:
        if not args.home:
            raise
        return _home_config_failed(path, args.home)
    disabled = channel_reasons(broken)
    elsewhere = owned_elsewhere(config)
    turn: Turn | None = None
    if args.home:
        turn = _take_turn(config, args.home, elsewhere)
        if turn.skipped:
            logging.getLogger("watchdogs.scheduler").info("%s", turn.skipped)
            return CommandResult(f"SKIPPED  {turn.skipped}", {"skipped": turn.skipped, "items": []})
    if elsewhere:
        # The live database belongs to a scheduler on another host (docs/state.md): run the
        # items and print, but record nothing and send nothing from here.
        logging.getLogger("watchdogs.state").warning(
            "%s: this run uses a private scratch state and sends no alert (the scheduler does)", elsewhere)
    previous = signal.signal(signal.SIGTERM, _interrupt)   # drop-ins run in sessions of their own
    try:
        state = State(open_store(scratch_dir())[0]) if elsewhere else open_state(config.scheduler.state_dir)
        sink: ResultSink = QuietSink() if elsewhere else build_sink(config, state.store)
        tell_state(config, state, sink)
        _tell_disabled(config, sink, disabled)
        if args.home:   # the copy a later run falls back on; an earlier config alert resolves
            remember(config.path, config.scheduler.state_dir,
                     LoadedConfig(config, (), disabled, config.path.read_bytes()))
            now = datetime.now(timezone.utc)
            sink.handle([selfalerts.config_ok(now, [n.name for n in config.notifiers if n.enabled])], now)
        instance = _begin_home(state.store, args.home) if turn is not None else None
        report = run_once(config, state.store, sink, load_group(CHECKS_GROUP), due_only=args.due,
                          owns_state=not elsewhere and state.problem is None, lock_held=turn is not None)
        if instance is not None:
            _end_home(state.store, instance, args.home, report.worst, config)
        if state.problem is None and not elsewhere:
            publish_view(state.store, "`watchdogs run --once`")
    except KeyboardInterrupt as exc:
        name = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
        logging.getLogger("watchdogs.scheduler").error(
            "run --once interrupted (%s): the running drop-ins were stopped; nothing was reported", name)
        return CommandResult("", {}, exit_code=143 if name == "SIGTERM" else 130)
    finally:
        signal.signal(signal.SIGTERM, previous)
        remove_scratch()
        if turn is not None:
            turn.release()
    # The terminal gets each problem whole (file, table, key, value, what was expected); the
    # alert to the other channels carries the short form.
    lines = [f"DISABLED channel {name}: {'; '.join(one_line(str(p)) for p in problems)}"
             for name, problems in sorted(broken.items())]
    items = []
    for run in report.runs:
        status = run.result.status.name if run.result else "UNKNOWN"
        summary = run.result.summary if run.result else "interrupted"
        lines.append(f"{status:<8} {one_line(run.item, 200)}: {one_line(summary)}")
        items.append({"item": run.item, "kind": run.kind, "status": status, "summary": summary,
                      "details": list(run.result.details) if run.result else [], "log": run.log,
                      "job_id": run.job_id, "seconds": round(run.finished - run.started, 3)})
    for refusal in report.refused:
        lines.append(f"REFUSED  {refusal}")
    lines += [f"SKIPPED  {skip}" for skip in report.skipped]
    if not report.runs and not report.skipped:
        lines.append("nothing due" if args.due else "nothing to run: no checks and no drop-ins")
    data = {"items": items, "refused": [{"path": r.path, "reason": r.reason} for r in report.refused],
            "skipped": [{"item": s.item, "reason": s.reason} for s in report.skipped],
            "worst": report.worst.name, "disabled_channels": disabled}
    worst = max(int(report.worst), int(Status.CRITICAL) if disabled else 0)
    if args.home:
        # The channels carry the result; a cron's exit code would only mark each minute's
        # job FAILED in sacct (scrontab) or mean nothing (cron). 0: this run was made.
        worst = 0
    return CommandResult("\n".join(lines), data, exit_code=worst)
