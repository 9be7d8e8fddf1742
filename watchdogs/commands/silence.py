"""`watchdogs silence ITEM --for 2h --reason ...`, `watchdogs ack ITEM`, `watchdogs silences`.

ITEM is a check name, a drop-in id such as "cron.hourly/check_gpu", or a glob of them.
Silenced alerts are still recorded, just not sent; an acknowledged alert is not repeated
until its status changes.
"""
from __future__ import annotations

import argparse
import fnmatch
import time
from datetime import datetime

from watchdogs import humanize, units
from watchdogs.alerts import records, silences
from watchdogs.commands.base import CommandResult, config_from_args
from watchdogs.config import Config
from watchdogs.errors import WatchdogsError
from watchdogs.scheduler import changes
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
    parser = sub.add_parser("resolve", help="close the open alerts of an item (or a glob) by hand, "
                                            "with a reason")
    parser.add_argument("item", help="check name, drop-in id, or a glob")
    parser.add_argument("--reason", required=True, help="why (shown in the RESOLVED message)")
    parser.set_defaults(handler=resolve)
    parser = sub.add_parser("silences", help="list running silences, or end one")
    parser.add_argument("--all", action="store_true", help="include ended silences")
    parser.add_argument("--expire", type=int, metavar="ID", help="end silence ID now")
    parser.set_defaults(handler=list_silences)


def open_store(args: argparse.Namespace) -> tuple[StateStore | None, list[str], Config]:
    """The state as the read-only commands see it (the view the scheduler publishes; None
    when nothing was recorded yet), the item names it knows about, and the config."""
    config = config_from_args(args)
    store = changes.reader(config.scheduler.state_dir)
    states = records.load_states(store.connection()) if store is not None and _has_alerts(store) else {}
    known = set(states) | {c.name for c in config.checks}
    return store, sorted(known), config


def _has_alerts(store: StateStore) -> bool:
    return has_table(store, "alert_state")


whoami = changes.whoami


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def silence(args: argparse.Namespace) -> CommandResult:
    try:
        seconds = units.parse_duration(args.duration)
    except ValueError as exc:
        raise WatchdogsError(f"--for {args.duration!r}: expected {exc}") from None
    if seconds <= 0:
        raise WatchdogsError(f"--for {args.duration!r}: expected a duration longer than zero")
    _, known, config = open_store(args)
    sent = time.time()
    done, how = changes.change(config, "silence", {"item": args.item, "seconds": seconds,
                                                   "reason": args.reason})
    answered = time.time()
    changes.describe(done, how)
    matched = [k for k in known if fnmatch.fnmatchcase(k, args.item)]
    shown = one_line(repr(args.item), 200)
    # The scheduler starts the silence when it applies it, by its own clock: the end shown
    # is the one it will keep, in its time.
    head = (f"silence {done.data['id']}: {shown} until {when(float(done.data['ends']))}"
            if done is not None else f"silence of {shown} for {args.duration} QUEUED, not yet applied "
            "(it starts when the scheduler applies it, and lasts its duration from then)")
    skew = clock_skew(done.data.get("applied_at") if done is not None else None, sent, answered)
    text = (f"{head} ({args.duration})" + (f", reason: {one_line(args.reason, 1000)}" if args.reason else "")
            + (f"\n{skew_note(skew)}" if skew is not None else "")
            + ("\nmatches: " + ", ".join(matched) if matched else
               "\nmatches no item seen so far (a drop-in that has not run yet is fine)")
            + f"\n{how}")
    data: dict[str, object] = {"applied": done is not None, "how": how, "matches": matched,
                               "clock_skew_s": skew}
    if done is not None:
        data["silence"] = {"id": done.data["id"], "pattern": args.item,
                           "ends": when(float(done.data["ends"])), "reason": args.reason, "author": whoami()}
    return CommandResult(text, data)


SKEW_TOLERANCE_S = 60.0
"""A difference of clocks worth telling: below it, NTP's usual drift and the wait itself."""


def clock_skew(applied_at: object, sent: float, answered: float) -> float | None:
    """How far the scheduler's clock is ahead of this host's (negative: behind), or None
    when within SKEW_TOLERANCE_S (or unknown). The scheduler applied the command between
    `sent` and `answered` by this host's clock; outside that window, the clocks differ."""
    if isinstance(applied_at, bool) or not isinstance(applied_at, (int, float)) or applied_at != applied_at:
        return None
    if sent - SKEW_TOLERANCE_S <= applied_at <= answered + SKEW_TOLERANCE_S:
        return None
    return float(applied_at) - (sent + answered) / 2  # off by at most half the wait


def skew_note(skew: float) -> str:
    way = "ahead of" if skew > 0 else "behind"
    return (f"note: the scheduler's clock is {humanize.duration(abs(skew))} {way} this host's; the times "
            "shown are the scheduler's (fix the clock that is wrong: NTP/chrony)")


def ack(args: argparse.Namespace) -> CommandResult:
    _, _, config = open_store(args)
    done, how = changes.change(config, "ack", {"item": args.item})
    text, code = changes.describe(done, how)
    return CommandResult(text, {"applied": done is not None, "how": how,
                                "acknowledged": done.data.get("acknowledged", []) if done else []}, code)


def resolve(args: argparse.Namespace) -> CommandResult:
    _, _, config = open_store(args)
    done, how = changes.change(config, "resolve", {"item": args.item, "reason": args.reason})
    text, code = changes.describe(done, how)
    return CommandResult(text, {"applied": done is not None, "how": how,
                                "resolved": done.data.get("resolved", []) if done else []}, code)


def has_table(store: StateStore, name: str) -> bool:
    return store.connection().execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def _silence_data(s: silences.Silence) -> dict[str, object]:
    return {"id": s.id, "pattern": s.pattern, "starts": when(s.starts), "ends": when(s.ends),
            "reason": s.reason, "author": s.author}


def list_silences(args: argparse.Namespace) -> CommandResult:
    store, _, config = open_store(args)
    now = time.time()
    if args.expire is not None:
        done, how = changes.change(config, "expire", {"id": args.expire})
        text, code = changes.describe(done, how)
        return CommandResult(text if done is None else f"silence {args.expire} ended\n({how})",
                             {"expired": args.expire, "applied": done is not None, "how": how}, code)
    has = store is not None and has_table(store, "silences")
    found = silences.listing(store.connection(), now, include_expired=args.all) if has and store else []
    lines = [f"{s.id:>4}  {one_line(s.pattern, 200):<30} until {when(s.ends)}"
             f"{'' if s.active(now) else ' (ended)'}  by {one_line(s.author, 100)}"
             f"{': ' + one_line(s.reason, 1000) if s.reason else ''}" for s in found]
    text = "\n".join(lines) if lines else "no running silences"
    return CommandResult(text, {"silences": [_silence_data(s) | {"active": s.active(now)} for s in found]})
