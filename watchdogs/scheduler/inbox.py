"""Applying queued changes (watchdogs.state.inbox) to the state database, by its one writer:
the chain instance each tick, or a command applying directly when no chain runs and the
lock is one every host sees.

`resolve` and "removed from the config" close an alert through the normal lifecycle: an OK
outcome of the item, so the RESOLVED message, its routing and its history are the usual
ones, with the reason as the summary.
"""
from __future__ import annotations

import fnmatch
import logging
import math
import socket
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from watchdogs import units
from watchdogs.alerts import records, schema, silences
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome
from watchdogs.state import inbox
from watchdogs.state.store import StateStore
from watchdogs.textsafe import one_line

LOG = logging.getLogger("watchdogs.scheduler")
REMOVED = "item removed from the config"


def apply_pending(store: StateStore, state_dir: Path, applier: str, now: float, quiet: bool = False,
                  queue: inbox.Queue | None = None) -> list[ItemOutcome]:
    """Apply every queued command (of `queue`, else of a look at the inbox now), answer
    each; returns the outcomes (resolutions) for the sink. A command that fails is answered
    with the error, never left for ever; one that cannot even be answered is logged and the
    next ones still go (a bad entry never blocks the queue)."""
    outcomes: list[ItemOutcome] = []
    if queue is None:
        queue = inbox.take(state_dir)
        for entry in queue.set_aside:  # the scheduler, when it next starts, tells the channels
            LOG.warning("inbox entry set aside: %s", entry)
    commands = queue.commands
    if not commands:
        return outcomes
    schema.ensure(store)
    by = f"{applier} on {socket.gethostname()}"
    for command in commands:
        try:
            result, made = apply(store, command, now)
        except Exception as exc:  # one bad command must not stop the others; its sender hears why
            LOG.exception("command %s (%s) failed", command.name, command.verb)
            result = inbox.Outcome(False, f"{command.verb} failed: {one_line(str(exc), 500)}")
            made = []
        outcomes += made
        try:
            inbox.answer(state_dir, command, inbox.Outcome(result.ok, result.text, result.data, by))
        except OSError as exc:
            LOG.error("cannot answer command %s (applied: %s): %s", command.name, result.ok, exc)
            continue
        if not quiet:  # a command applying its own change prints the answer; no log line besides
            LOG.info("applied %s from %s@%s: %s", command.verb, command.author, command.host, result.text)
    return outcomes


def _text(args: dict[str, Any], key: str, limit: int, default: str | None = None) -> str:
    """A text argument, on one line (control characters escaped) and bounded: it is echoed
    to terminals, stored, and becomes a RESOLVED message's summary."""
    value = args.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be text")
    return one_line(value, limit)


def _seconds(args: dict[str, Any]) -> float:
    value = args.get("seconds")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= units.MAX_DURATION:
        raise ValueError(f"seconds must be a duration above 0 and at most 10 years, not {value!r}")
    return float(value)


def apply(store: StateStore, command: inbox.Command, now: float) -> tuple[inbox.Outcome, list[ItemOutcome]]:
    args = command.args
    author = one_line(command.author, 100)
    if command.verb == "silence":
        return _silence(store, command, now), []
    if command.verb == "expire":
        ident = args.get("id")
        if isinstance(ident, bool) or not isinstance(ident, int):
            raise ValueError(f"id must be a whole number, not {ident!r}")
        with store.transaction() as db:
            ended = silences.expire(db, ident, now)
        if not ended:
            return inbox.Outcome(False, f"no running silence with id {ident} "
                                 "(see `watchdogs silences`)"), []
        return inbox.Outcome(True, f"silence {ident} ended", {"expired": ident}), []
    if command.verb == "ack":
        item = _text(args, "item", 500)
        wanted = _open_matching(store, item)
        if not wanted[0]:
            return inbox.Outcome(False, f"no open alert matches {item!r} (open alerts: "
                                 f"{', '.join(wanted[1]) or 'none'})"), []
        with store.transaction() as db:
            records.acknowledge(db, wanted[0], now, author)
        return inbox.Outcome(True, f"acknowledged: {', '.join(wanted[0])} (no reminders until the status "
                             "changes)", {"acknowledged": wanted[0]}), []
    if command.verb == "resolve":
        item = _text(args, "item", 500)
        wanted = _open_matching(store, item)
        if not wanted[0]:
            return inbox.Outcome(False, f"no open alert matches {item!r} (open alerts: "
                                 f"{', '.join(wanted[1]) or 'none'})"), []
        reason = f"resolved by {author}: {_text(args, 'reason', 1000, '') or 'no reason given'}"
        made = resolutions(store, wanted[0], reason, now)
        return inbox.Outcome(True, f"resolved: {', '.join(wanted[0])} ({reason}); the RESOLVED message "
                             "goes out now; a run that fails again opens a new alert",
                             {"resolved": wanted[0]}), made
    return inbox.Outcome(False, f"cannot apply {command.name}: "
                         f"{one_line(str(args.get('error', command.verb)), 500)}"), []


def _silence(store: StateStore, command: inbox.Command, now: float) -> inbox.Outcome:
    """A silence runs for its duration from when the scheduler applies it (`now`, the
    scheduler's clock), not from the sender's clock: a login node whose clock is behind
    would otherwise send a silence that ended before it arrived. The answer carries the
    scheduler's time of receipt, so the sender can show the end in the scheduler's time
    and say how far its own clock is off."""
    args = command.args
    pattern, reason = _text(args, "item", 500), _text(args, "reason", 1000, "")
    author = one_line(command.author, 100)
    seconds = _seconds(args)
    with store.transaction() as db:
        # Applied twice after a crash between the change and its answer: the same silence.
        # The command's own `created` stamp is its identity (stored as the silence's
        # `created`). A command queued by an earlier version was stored with starts =
        # created, so that is looked for too: still applied once across an upgrade.
        row = db.execute("SELECT * FROM silences WHERE pattern = ? AND author = ? AND "
                         "(created = ? OR starts = ?)",
                         (pattern, author, command.created, command.created)).fetchone()
        made = silences.Silence(**dict(row)) if row else \
            silences.add(db, pattern, now, now + seconds, reason, author, created=command.created)
    return inbox.Outcome(True, f"silence {made.id}", {"id": made.id, "ends": made.ends, "starts": made.starts,
                                                       "applied_at": now})


def _open_matching(store: StateStore, pattern: str) -> tuple[list[str], list[str]]:
    open_items = sorted(i for i, s in records.load_states(store.connection()).items() if s.open)
    return [i for i in open_items if fnmatch.fnmatchcase(i, pattern)], open_items


def resolutions(store: StateStore, items: Iterable[str], reason: str, now: float) -> list[ItemOutcome]:
    """An OK outcome per open alert of `items`, with `reason` as what the reader sees."""
    states = records.load_states(schema.ensure(store).connection(), list(items))
    when = datetime.fromtimestamp(now, timezone.utc)
    return [ItemOutcome(s.item, s.kind, CheckResult(Status.OK, reason), when, when, after=1)
            for s in states.values() if s.open]


def removed_items(store: StateStore, scheduled: Iterable[str], refused: Iterable[str], now: float
                  ) -> list[ItemOutcome]:
    """Open alerts of items that are neither scheduled nor refused (a refused drop-in is
    still there; it has its own alert) nor the watchdog's own: the item left the config."""
    keep = set(scheduled)
    refused = list(refused)
    states = records.load_states(schema.ensure(store).connection())
    gone = [i for i, s in states.items() if s.open and i not in keep and not i.startswith("watchdogs:")
            and not any(r.endswith("/" + i) or r == i for r in refused)]
    return resolutions(store, gone, REMOVED, now)
