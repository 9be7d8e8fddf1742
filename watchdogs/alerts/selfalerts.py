"""The watchdog's news about itself, as ordinary outcomes of items named `watchdogs:*`, so
they follow the same lifecycle as any check: said once per change (a different error is a
new fingerprint), repeated while it lasts, RESOLVED when fixed. They go to every working
channel whatever the routes say: a route naming only the broken channel must not swallow
the news that it is broken.
"""
from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from datetime import datetime, timedelta

from watchdogs.result import CheckResult, Notice, Status
from watchdogs.sink import ItemOutcome

CONFIG = "watchdogs:config"
STATE = "watchdogs:state"
CHANNEL_PREFIX = "watchdogs:channel:"
KIND = "watchdogs"


def channel_item(name: str) -> str:
    return f"{CHANNEL_PREFIX}{name}"


def fingerprint(lines: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]


def everyone(channels: Sequence[str]) -> dict[str, tuple[str, ...]]:
    names = tuple(channels)
    return {"critical": names, "warning": names, "unknown": names, "resolved": names, "notice": names}


def outcome(item: str, status: Status, summary: str, now: datetime, channels: Sequence[str],
            details: Sequence[str] = (), key: Sequence[str] = (), runbook: str | None = None
            ) -> ItemOutcome:
    """`key`: what identifies the problem (the error lines): a new key is a new alert.
    `runbook`: what to do, shown as the message's `next:` (else it would say `watchdogs alerts`,
    which only repeats the alert)."""
    result = CheckResult(status, summary, tuple(details),
                         fingerprint=fingerprint(key) if status is not Status.OK else "")
    return ItemOutcome(item, KIND, result, now, now, notify=everyone(channels), after=1,
                       runbook=runbook if status is not Status.OK else None)


def config_broken(problems: Sequence[str], config_path: str, now: datetime,
                  channels: Sequence[str], running: bool = False) -> ItemOutcome:
    """`running`: seen by a running instance (which keeps the config it loaded), not at start."""
    head = problems[0] if len(problems) == 1 else f"{len(problems)} problems"
    where = ("the running instance keeps the config it loaded; the next one would not start"
             if running else f"told from the last good copy of {config_path}; the chain backs off")
    return outcome(CONFIG, Status.CRITICAL, f"watchdogs cannot load its config: {head}", now, channels,
                   details=(*problems, f"{where}: fix the file (`watchdogs validate`)"), key=problems,
                   runbook=f"watchdogs validate --config {shlex.quote(config_path)}")


def config_ok(now: datetime, channels: Sequence[str]) -> ItemOutcome:
    return outcome(CONFIG, Status.OK, "watchdogs loads its config again", now, channels)


def channel_disabled(name: str, reasons: Sequence[str], now: datetime,
                     channels: Sequence[str]) -> ItemOutcome:
    return outcome(channel_item(name), Status.CRITICAL,
                   f"alert channel {name} is disabled: {'; '.join(reasons)}", now, channels,
                   details=("every other channel and every check keep working; alerts meant for it "
                            "go nowhere until it is fixed",), key=reasons,
                   runbook=f"fix it where the scheduler runs (the chain's environment), then "
                           f"`watchdogs notify-test {name}`; `watchdogs doctor --on-node` checks them all")


def channel_ok(name: str, now: datetime, channels: Sequence[str]) -> ItemOutcome:
    return outcome(channel_item(name), Status.OK, f"alert channel {name} works again", now, channels)


def state_broken(kind: str, detail: str, state_dir: str, now: datetime,
                 channels: Sequence[str]) -> ItemOutcome:
    return outcome(STATE, Status.CRITICAL, f"state directory {kind}: {state_dir}: {detail}", now, channels,
                   details=("checks keep running; alerts are sent directly from memory (no outbox, "
                            "no retries after a restart) until the state directory can be written",),
                   key=(kind,), runbook=f"ls -ld {shlex.quote(state_dir)}; watchdogs doctor")


def state_ok(now: datetime, channels: Sequence[str], note: str = "") -> ItemOutcome:
    return outcome(STATE, Status.OK, note or "the state directory can be written again", now, channels)


ALERTS = "watchdogs:alerts"
"""The alert store itself failing for a reason that is not the state directory (a bug)."""


def store_failed(error: str, count: int, now: datetime, channels: Sequence[str]) -> ItemOutcome:
    return outcome(ALERTS, Status.CRITICAL, f"watchdogs could not record {count} check result(s) in its "
                   f"alert store ({error[:300]}): they were sent directly", now, channels,
                   details=("no alert is lost: results go out from memory (no grouping with earlier ones, "
                            "no retries after a restart) until the store takes them again; this is a bug "
                            "of watchdogs, the scheduler log has the traceback",), key=(error[:300],),
                   runbook="report the traceback after 'the alert store failed' in the scheduler's log")


def store_ok(now: datetime, channels: Sequence[str]) -> ItemOutcome:
    return outcome(ALERTS, Status.OK, "the alert store records check results again", now, channels)


CHAIN = "watchdogs:chain"
"""The chain itself: about to go blind (WARNING), ended by something else than `stop`
(CRITICAL), watching again (OK, with the gap's notice)."""


def _clock(when: datetime, seconds: bool = False) -> str:
    return when.astimezone().strftime("%H:%M:%S" if seconds else "%H:%M")


def _length(span: timedelta) -> str:
    seconds = span.total_seconds()
    return f"{round(seconds / 60)} min" if seconds >= 90 else f"{round(seconds)} s"


def goes_blind(stops: datetime, successor: str, remedies: Sequence[str], now: datetime,
               channels: Sequence[str]) -> ItemOutcome:
    """The successor has not started and this instance's time limit is near: told before
    watching stops, with what would help. `successor`: "successor job 12 PENDING (Priority),
    Slurm expects 15:10"."""
    minutes = max(0, round((stops - now).total_seconds() / 60))
    return outcome(CHAIN, Status.WARNING,
                   f"watchdogs goes blind at {_clock(stops)} (in {minutes} min): {successor}", now, channels,
                   details=("nothing is checked from then until the successor starts; "
                            "the first instance after the gap says how long it lasted",
                            *(f"would help: {r}" for r in remedies)),
                   key=(successor.split(" PENDING")[0],),
                   runbook="`watchdogs doctor` lists the partitions and homes that start sooner here")


def chain_ended(what: str, successor: str | None, restart: str, now: datetime,
                channels: Sequence[str]) -> ItemOutcome:
    """The last word of an instance ended by anything but `watchdogs stop`. `what`: who or
    what ended it; `successor`: the queued successor, None when none is queued."""
    after = (f"{successor}; until it runs nothing is checked; if it does not start: {restart}"
             if successor else f"no successor is queued: nothing watches from now on; restart: {restart}")
    return outcome(CHAIN, Status.CRITICAL, f"watchdogs chain instance {what}; {after}", now, channels,
                   details=(f"ended at {_clock(now)}",), key=("ended", str(successor is None)),
                   runbook=restart)


def watching_again(now: datetime, channels: Sequence[str], gap: tuple[datetime, datetime] | None = None,
                   why: str = "") -> ItemOutcome:
    """A new instance holds the state: resolves a goes_blind or chain_ended alert, and with
    `gap` tells once how long nothing watched."""
    summary = "watchdogs watches again" if gap else "watchdogs watches again: a new instance took over"
    found = outcome(CHAIN, Status.OK, summary, now, channels)
    if gap is None:
        return found
    start, end = gap
    notice = Notice(f"not watching from {_clock(start, True)} to {_clock(end, True)} ({_length(end - start)})"
                    + (f": {why}" if why else ""),
                    ("alerts about what happened in that window say they were seen late",), kind="gap")
    result = CheckResult(Status.OK, found.result.summary, notices=(notice,))
    return ItemOutcome(CHAIN, KIND, result, now, now, notify=found.notify, after=1)


REFUSED_PREFIX = "watchdogs:refused:"
ONCE_S = 365 * 86400.0
"""A refused drop-in is told once (and resolved when fixed), not repeated every 4 hours."""


def refused_item(path: str) -> str:
    return f"{REFUSED_PREFIX}{path}"


def refusal_fix(path: str, reason: str) -> str:
    """The command that fixes a refusal, from its reason (the reasons are ours: discovery),
    the path quoted for a shell."""
    shown = shlex.quote(path)
    if "writable by" in reason:
        return f"chmod go-w {shown}"
    if "owned by" in reason or "owner" in reason:
        return f"chown $USER {shown}, or remove it if it is not yours"
    if "not executable" in reason:
        return f"chmod u+x {shown}"
    if "link" in reason or "loop" in reason or "No such file" in reason:
        return f"ls -l {shown}; point the link at an existing file, or remove it"
    if reason.startswith(NAME_PREFIX):
        return f"mv {shown} {shlex.quote(run_parts_name(path))}"
    return f"see `watchdogs status`; then fix or remove {path}"


NAME_PREFIX = "name not run: "
"""How watchdogs.dropins.discovery.name_problem starts its reasons."""


def run_parts_name(path: str) -> str:
    """A name cron's run-parts would run, for the fix: the extension dropped (`check.sh` ->
    `check`; `.slurm` kept), every other odd character made `-`."""
    folder, _, name = path.rpartition("/")
    slurm = name.endswith(".slurm")
    stem = name.removesuffix(".slurm")
    if not slurm and "." in stem.strip("."):
        stem = stem.rsplit(".", 1)[0]
    stem = re.sub(r"[^A-Za-z0-9_-]", "-", stem).strip("-") or "dropin"
    return f"{folder}/{stem}{'.slurm' if slurm else ''}" if folder else f"{stem}{'.slurm' if slurm else ''}"


def _said(reason: str) -> str:
    """The reason as the alert's sentence reads it ("will not run: its name holds '.'")."""
    if reason.startswith(NAME_PREFIX + "it holds "):
        return "its name holds " + reason.removeprefix(NAME_PREFIX + "it holds ")
    if reason.startswith(NAME_PREFIX):
        return "its name has " + reason.removeprefix(NAME_PREFIX)
    return reason


def refused(path: str, reason: str, now: datetime) -> ItemOutcome:
    """A file a person put in cron.d that will never run: a WARNING, through the default
    route (it is the user's item, not the watchdog's own breakage)."""
    fix = refusal_fix(path, reason)
    result = CheckResult(Status.WARNING, f"{path} will not run: {_said(reason)}",
                         (f"fix: {fix}", "until then it is skipped at every tick"),
                         fingerprint=fingerprint((reason,)))
    return ItemOutcome(refused_item(path), KIND, result, now, now, after=1, repeat_every=ONCE_S,
                       runbook=fix)


def refusal_fixed(path: str, now: datetime) -> ItemOutcome:
    result = CheckResult(Status.OK, f"{path} is no longer refused (fixed or removed)")
    return ItemOutcome(refused_item(path), KIND, result, now, now, after=1, repeat_every=ONCE_S)


INBOX_REJECTED = "watchdogs:inbox:rejected"
INBOX_REFUSED = "watchdogs:inbox"


def inbox_rejected(entries: Sequence[str], inbox: str, now: datetime, what: str = "") -> ItemOutcome:
    """Entries of the inbox that were not commands of yours (another user's file, a FIFO, a
    folder, a symlink...), moved aside unread: one WARNING naming each and its owner, as
    someone may be trying to silence your alerts. OK (`entries` empty) once
    inbox/rejected/ is emptied."""
    rejected = shlex.quote(f"{inbox}/rejected")
    if not entries:
        result = CheckResult(Status.OK, f"nothing is set aside in {inbox}/rejected any more")
        return ItemOutcome(INBOX_REJECTED, KIND, result, now, now, after=1, repeat_every=ONCE_S)
    head = what or (entries[0] if len(entries) == 1 else f"{len(entries)} entries")
    fix = f"ls -la {rejected}; then remove them: rm -r {rejected}/*"
    result = CheckResult(Status.WARNING, f"the inbox held what is not a command of yours, set aside unread: "
                         f"{head}",
                         (*entries, "only regular files you own are applied (docs/trust.md)", f"fix: {fix}"),
                         fingerprint=fingerprint(entries))
    return ItemOutcome(INBOX_REJECTED, KIND, result, now, now, after=1, repeat_every=ONCE_S, runbook=fix)


def inbox_refused(why: str | None, inbox: str, now: datetime) -> ItemOutcome:
    """The inbox folder is writable by others (or not ours): no command is applied from it
    (CRITICAL: silences and resolves from the login nodes stop working); OK once fixed."""
    if why is None:
        return ItemOutcome(INBOX_REFUSED, KIND, CheckResult(Status.OK, f"{inbox} is read again"),
                           now, now, after=1)
    fix = f"chmod go-w {shlex.quote(inbox)}"
    result = CheckResult(Status.CRITICAL, "queued changes (silence, ack, resolve) are not applied: "
                         "others can write the inbox", (why, f"fix: {fix}"), fingerprint=fingerprint((why,)))
    return ItemOutcome(INBOX_REFUSED, KIND, result, now, now, after=1, runbook=fix)
