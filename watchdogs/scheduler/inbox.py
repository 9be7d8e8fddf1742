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
import socket
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from watchdogs.alerts import records, schema, silences
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome
from watchdogs.state import inbox
from watchdogs.state.store import StateStore

LOG = logging.getLogger("watchdogs.scheduler")
REMOVED = "item removed from the config"


def apply_pending(store: StateStore, state_dir: Path, applier: str, now: float, quiet: bool = False
                  ) -> list[ItemOutcome]:
    """Apply every queued command, answer each; returns the outcomes (resolutions) for the
    sink. A command that fails is answered with the error, never left for ever."""
    outcomes: list[ItemOutcome] = []
    commands = inbox.pending(state_dir)
    if not commands:
        return outcomes
    schema.ensure(store)
    by = f"{applier} on {socket.gethostname()}"
    for command in commands:
        try:
            result, made = apply(store, command, now)
        except Exception as exc:  # one bad command must not stop the others; its sender hears why
            LOG.exception("command %s (%s) failed", command.name, command.verb)
            result = inbox.Outcome(False, f"{command.verb} failed: {exc}")
            made = []
        outcomes += made
        inbox.answer(state_dir, command, inbox.Outcome(result.ok, result.text, result.data, by))
        if not quiet:  # a command applying its own change prints the answer; no log line besides
            LOG.info("applied %s from %s@%s: %s", command.verb, command.author, command.host, result.text)
    return outcomes


def apply(store: StateStore, command: inbox.Command, now: float) -> tuple[inbox.Outcome, list[ItemOutcome]]:
    args = command.args
    if command.verb == "silence":
        return _silence(store, command), []
    if command.verb == "expire":
        with store.transaction() as db:
            ended = silences.expire(db, int(args["id"]), now)
        if not ended:
            return inbox.Outcome(False, f"no running silence with id {args['id']} "
                                 "(see `watchdogs silences`)"), []
        return inbox.Outcome(True, f"silence {args['id']} ended", {"expired": int(args["id"])}), []
    if command.verb == "ack":
        wanted = _open_matching(store, str(args["item"]))
        if not wanted[0]:
            return inbox.Outcome(False, f"no open alert matches {args['item']!r} (open alerts: "
                                 f"{', '.join(wanted[1]) or 'none'})"), []
        with store.transaction() as db:
            records.acknowledge(db, wanted[0], now, command.author)
        return inbox.Outcome(True, f"acknowledged: {', '.join(wanted[0])} (no reminders until the status "
                             "changes)", {"acknowledged": wanted[0]}), []
    if command.verb == "resolve":
        wanted = _open_matching(store, str(args["item"]))
        if not wanted[0]:
            return inbox.Outcome(False, f"no open alert matches {args['item']!r} (open alerts: "
                                 f"{', '.join(wanted[1]) or 'none'})"), []
        reason = f"resolved by {command.author}: {args.get('reason') or 'no reason given'}"
        made = resolutions(store, wanted[0], reason, now)
        return inbox.Outcome(True, f"resolved: {', '.join(wanted[0])} ({reason}); the RESOLVED message "
                             "goes out now; a run that fails again opens a new alert",
                             {"resolved": wanted[0]}), made
    return inbox.Outcome(False, f"cannot apply {command.name}: {args.get('error', command.verb)}"), []


def _silence(store: StateStore, command: inbox.Command) -> inbox.Outcome:
    args = command.args
    starts, ends = float(command.created), float(command.created) + float(args["seconds"])
    with store.transaction() as db:
        # Applied twice after a crash between the change and its answer: the same silence.
        row = db.execute("SELECT id FROM silences WHERE pattern = ? AND starts = ? AND author = ?",
                         (args["item"], starts, command.author)).fetchone()
        made = silences.Silence(int(row[0]), str(args["item"]), starts, ends, str(args.get("reason", "")),
                                command.author, starts) if row else \
            silences.add(db, str(args["item"]), starts, ends, str(args.get("reason", "")), command.author)
    return inbox.Outcome(True, f"silence {made.id}", {"id": made.id, "ends": made.ends})


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
