"""`watchdogs alerts`: open alerts (age, last notification, ack, silence), messages waiting
in the outbox, failing channels, and optionally recent history. Never shows a secret:
stored errors were scrubbed when recorded and are scrubbed again here."""
from __future__ import annotations

import argparse
import time
from typing import Any

from notifiers.render import age
from notifiers.secrets import scrub
from watchdogs.alerts import health, outbox, records, silences
from watchdogs.commands.base import CommandResult, channel_secrets, config_from_args
from watchdogs.commands.silence import has_table, open_store, when
from watchdogs.result import Status
from watchdogs.state import snapshot
from watchdogs.textsafe import one_line


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("alerts", help="open alerts, undelivered messages and failing channels")
    parser.add_argument("--history", type=history_count, default=0, metavar="N",
                        help="also the last N events")
    parser.set_defaults(handler=show_alerts)


MAX_HISTORY = 1_000_000


def history_count(text: str) -> int:
    """--history N: a whole number from 0 to MAX_HISTORY (SQLite's LIMIT is 64-bit)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
    if not 0 <= value <= MAX_HISTORY:
        raise argparse.ArgumentTypeError(f"{text}: expected a number from 0 to {MAX_HISTORY:,}")
    return value


def _open_alerts(db: Any, now: float) -> list[dict[str, Any]]:
    running = silences.listing(db, now)
    found = []
    for state in sorted(records.load_states(db).values(), key=lambda s: (-s.status.severity, s.item)):
        if state.status is Status.OK and not state.open:
            continue
        silence = silences.silencing(running, state.item, now)
        found.append({
            "item": state.item, "kind": state.kind, "status": state.status.name, "summary": state.summary,
            "announced": state.notified.name if state.open else None,
            "since": when(state.since) if state.since else None,
            "age": age(now - state.since) if state.since else None,
            "last_notified": when(state.last_notified) if state.open and state.last_notified else None,
            "delivery": _delivery(db, state.item, state.last_notified) if state.open else None,
            "acked_by": state.acked_by, "silenced_by": silence.id if silence else None,
            "bad_readings": state.bad_streak})
    return found


def _delivery(db: Any, item: str, announced: float | None) -> list[dict[str, Any]] | None:
    """What became of the last announcement, per channel: delivered (when) or still in the
    outbox (attempts, last error). [] when it was routed to no channel; None when unknown
    (the log was pruned). "Sent" is said only of a message a channel accepted."""
    if announced is None:
        return None
    row = db.execute("SELECT channels FROM alert_log WHERE item = ? AND at = ? ORDER BY id DESC LIMIT 1",
                     (item, announced)).fetchone()
    if row is None:
        return None
    found = []
    for channel in [c for c in str(row["channels"]).split(",") if c]:
        sent = db.execute("SELECT delivered, attempts, last_error FROM outbox WHERE channel = ? AND "
                          "created = ? ORDER BY id DESC LIMIT 1", (channel, announced)).fetchone()
        found.append({"channel": channel,
                      "delivered": when(sent["delivered"]) if sent and sent["delivered"] else None,
                      "attempts": sent["attempts"] if sent else None,
                      "last_error": scrub(sent["last_error"]) if sent and sent["last_error"] else None})
    return found


def _state_words(alert: dict[str, Any]) -> str:
    delivery = alert.get("delivery")
    if delivery is None:
        return f"announced {alert['last_notified']}"
    if not delivery:
        return (f"announced {alert['last_notified']} but sent nowhere: no channel routes it "
                "(see `watchdogs validate`)")
    sent = [d for d in delivery if d["delivered"]]
    waiting = [d for d in delivery if not d["delivered"]]
    parts = [f"sent {d['delivered']} via {d['channel']}" for d in sent]
    for d in waiting:
        if d["attempts"] is None:
            parts.append(f"NOT delivered via {d['channel']} (the message is no longer in the outbox)")
            continue
        error = f", last error: {d['last_error']}" if d["last_error"] else ""
        parts.append(f"NOT delivered via {d['channel']} yet (in the outbox since {alert['last_notified']}, "
                     f"{d['attempts']} attempt(s){error})")
    return "; ".join(parts)


def _pending(db: Any, now: float) -> list[dict[str, Any]]:
    return [{"id": i.id, "channel": i.channel, "key": i.key, "subject": i.message.subject,
             "queued": when(i.created), "age": age(now - i.created), "attempts": i.attempts,
             "next_attempt_in": age(max(i.next_attempt - now, 0)), "sending": _sending(i, now),
             "last_error": scrub(i.last_error) if i.last_error else None} for i in outbox.pending(db)]


def _sending(item: outbox.OutboxItem, now: float) -> dict[str, Any] | None:
    """Who holds the item right now: a sender killed mid-delivery holds it until its lease
    runs out, and "0 attempts, next in 0 s" would hide that."""
    held = item.holder(now)
    if held is None or item.lease_until is None:
        return None
    host, pid, since = held
    return {"pid": pid, "host": host, "since": when(since), "retry_after": when(item.lease_until),
            "retry_in": age(item.lease_until - now)}


def _channels(db: Any, now: float) -> list[dict[str, Any]]:
    return [{"channel": h.channel, "failing_since": when(h.failing_since), "for": age(now - h.failing_since),
             "last_error": scrub(h.last_error or ""), "others_told": h.down_alerted}
            for h in health.listing(db) if h.failing_since is not None]


def _line(alert: dict[str, Any]) -> str:
    if alert["announced"] is None:
        state = f"not announced yet ({alert['bad_readings']} bad reading(s))"
    else:
        state = _state_words(alert)
    extras = [f"acked by {one_line(alert['acked_by'], 200)}"] if alert["acked_by"] else []
    extras += [f"silenced (silence {alert['silenced_by']})"] if alert["silenced_by"] else []
    tail = "; ".join([state, *extras])
    return (f"  {alert['status']:<8} {one_line(alert['item'], 200)}  since {alert['since']} "
            f"({alert['age']}); {tail}\n           {one_line(alert['summary'], 1000)}")


def _pending_line(p: dict[str, Any]) -> str:
    s = p["sending"]
    when_next = (f"being sent by pid {s['pid']} on {s['host']} since {s['since']}; retried after "
                 f"{s['retry_after']} (in {s['retry_in']}) if that process does not finish"
                 if s else f"{p['attempts']} attempt(s), next in {p['next_attempt_in']}")
    line = f"  #{p['id']} {p['channel']}: {one_line(p['subject'], 1000)} (queued {p['age']} ago, {when_next})"
    return line + (f"\n      last error: {one_line(p['last_error'], 1000)}" if p["last_error"] else "")


def _history_line(h: dict[str, Any]) -> str:
    # The summary of a RESOLVED event is the resolve reason a person typed: one line, shown.
    line = (f"  {h['at']} {h['state']:<8} {h['status']:<8} {one_line(h['item'], 200)}: "
            f"{one_line(h['summary'], 1000)} -> {one_line(h['channels'] or '(nowhere)', 200)}")
    return line + (f" [silenced by {h['silenced_by']}]" if h["silenced_by"] else "")


UNREADABLE = 3
"""The exit code when the state view cannot be read: the open alerts are not known."""


def show_alerts(args: argparse.Namespace) -> CommandResult:
    store, _, config = open_store(args)
    now = time.time()
    # Never "no open alerts" from a view that cannot be read (empty, cut off, a FIFO): that
    # is not known, and saying so is the truth (docs/state.md, "The view").
    problem = snapshot.problem_of(config.scheduler.state_dir)
    if problem is not None:
        if store is not None:
            store.close()
        return CommandResult(f"Open alerts UNKNOWN: state view unusable: {problem.words}",
                             {"open": None, "pending": None, "failing_channels": None,
                              "problem": {"kind": problem.kind, "words": problem.words}},
                             exit_code=UNREADABLE)
    if store is None or not has_table(store, "alert_state"):
        data: dict[str, Any] = {"open": [], "pending": [], "failing_channels": []}
        return CommandResult("No open alerts (nothing was recorded here yet).", data)
    hidden = channel_secrets(config_from_args(args))
    db = store.connection()
    data = {"open": _open_alerts(db, now), "pending": _pending(db, now),
            "failing_channels": _channels(db, now)}
    lines = [f"Open alerts ({len(data['open'])}):" if data["open"] else "No open alerts."]
    lines += [_line(a) for a in data["open"]]
    if data["pending"]:
        lines.append(f"Waiting in the outbox ({len(data['pending'])}):")
        lines += [_pending_line(p) for p in data["pending"]]
    for channel in data["failing_channels"]:
        lines.append(f"Channel {channel['channel']} failing for {channel['for']}: {channel['last_error']}")
    if args.history:
        data["history"] = [dict(row, at=when(row["at"]), summary=scrub(str(row["summary"])))
                           for row in records.history(db, args.history)]
        lines.append(f"Last {len(data['history'])} events:")
        lines += [_history_line(h) for h in data["history"]]
    return CommandResult("\n".join(lines), data, hidden=hidden)
