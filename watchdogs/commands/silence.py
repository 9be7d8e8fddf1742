"""`watchdogs silence ITEM --for 2h --reason ...`, `watchdogs ack ITEM`, `watchdogs silences`.

ITEM is a check name, a drop-in id such as "cron.hourly/check_gpu", or a glob of them.
Silenced alerts are still recorded, just not sent; an acknowledged alert is not repeated
until its status changes.
"""
from __future__ import annotations

import argparse
import fnmatch
import getpass
import time
from datetime import datetime

from watchdogs import units
from watchdogs.alerts import records, schema, silences
from watchdogs.commands.base import CommandResult, config_from_args
from watchdogs.errors import WatchdogsError
from watchdogs.state.store import StateStore
from watchdogs.textsafe import one_line


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("silence", help="mute the alerts of a check or drop-in (or a glob) for a while")
    parser.add_argument("item", help="check name, drop-in id, or a glob such as 'cron.hourly/*'")
    parser.add_argument("--for", dest="duration", required=True, help='how long, e.g. "2h" or "1d"')
    parser.add_argument("--reason", default="", help="why (shown by `watchdogs silences`)")
    parser.set_defaults(handler=silence)
    parser = sub.add_parser("ack", help="acknowledge open alerts: no reminders until their status changes")
    parser.add_argument("item", help="check name, drop-in id, or a glob")
    parser.set_defaults(handler=ack)
    parser = sub.add_parser("silences", help="list running silences, or end one")
    parser.add_argument("--all", action="store_true", help="include ended silences")
    parser.add_argument("--expire", type=int, metavar="ID", help="end silence ID now")
    parser.set_defaults(handler=list_silences)


def open_store(args: argparse.Namespace) -> tuple[StateStore, list[str]]:
    """The state store of the configured scheduler, and the item names it knows about."""
    config = config_from_args(args)
    store = schema.ensure(StateStore(config.scheduler.state_dir))
    known = set(records.load_states(store.connection())) | {c.name for c in config.checks}
    return store, sorted(known)


def whoami() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def silence(args: argparse.Namespace) -> CommandResult:
    try:
        seconds = units.parse_duration(args.duration)
    except ValueError as exc:
        raise WatchdogsError(f"--for {args.duration!r}: expected {exc}") from None
    if seconds <= 0:
        raise WatchdogsError(f"--for {args.duration!r}: expected a duration longer than zero")
    store, known = open_store(args)
    now = time.time()
    with store.transaction() as db:
        made = silences.add(db, args.item, now, now + seconds, args.reason, whoami())
    matched = [k for k in known if made.matches(k)]
    text = (f"silence {made.id}: {one_line(repr(args.item), 200)} until {when(made.ends)} ({args.duration})"
            + (f", reason: {one_line(args.reason, 1000)}" if args.reason else "")
            + ("\nmatches: " + ", ".join(matched) if matched else
               "\nmatches no item seen so far (a drop-in that has not run yet is fine)"))
    return CommandResult(text, {"silence": _silence_data(made), "matches": matched})


def ack(args: argparse.Namespace) -> CommandResult:
    store, _ = open_store(args)
    db = store.connection()
    open_items = sorted(i for i, s in records.load_states(db).items() if s.open)
    wanted = [i for i in open_items if fnmatch.fnmatchcase(i, args.item)]
    if not wanted:
        listing = ", ".join(open_items) or "none"
        raise WatchdogsError(f"no open alert matches {args.item!r} (open alerts: {listing})")
    with store.transaction() as tx:
        records.acknowledge(tx, wanted, time.time(), whoami())
    return CommandResult(f"acknowledged: {', '.join(wanted)} (no reminders until the status changes)",
                         {"acknowledged": wanted})


def _silence_data(s: silences.Silence) -> dict[str, object]:
    return {"id": s.id, "pattern": s.pattern, "starts": when(s.starts), "ends": when(s.ends),
            "reason": s.reason, "author": s.author}


def list_silences(args: argparse.Namespace) -> CommandResult:
    store, _ = open_store(args)
    now = time.time()
    if args.expire is not None:
        with store.transaction() as db:
            if not silences.expire(db, args.expire, now):
                raise WatchdogsError(f"no running silence with id {args.expire} (see `watchdogs silences`)")
        return CommandResult(f"silence {args.expire} ended", {"expired": args.expire})
    found = silences.listing(store.connection(), now, include_expired=args.all)
    lines = [f"{s.id:>4}  {one_line(s.pattern, 200):<30} until {when(s.ends)}"
             f"{'' if s.active(now) else ' (ended)'}  by {one_line(s.author, 100)}"
             f"{': ' + one_line(s.reason, 1000) if s.reason else ''}" for s in found]
    text = "\n".join(lines) if lines else "no running silences"
    return CommandResult(text, {"silences": [_silence_data(s) | {"active": s.active(now)} for s in found]})
