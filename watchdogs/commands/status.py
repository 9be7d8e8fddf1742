"""`watchdogs status`: the scheduler's job and heartbeat, every scheduled item's last run,
result and next run, and refused drop-ins.

It reads the view the scheduler publishes each tick (docs/state.md), never the live
database, so it answers from any host and on a full disk, and says how old its view is.
Nagios contract: the first line is the summary with perfdata after `|`; the exit code is
the worst finding (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN). OK is earned (report/verdict.py):
someone watches (state/watching.py: not blind, ticking, not stopped), the view is whole,
the outbox empties, and no alert is open."""
from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from watchdogs.commands.base import CommandResult
from watchdogs.config import Config, find_config_path, load_config
from watchdogs.config.paths import NOT_ANSWERING
from watchdogs.errors import ConfigError, ConfigProblem
from watchdogs.fsprobe.answers import unanswered
from watchdogs.plugins import CHECKS_GROUP, load_group
from watchdogs.report.verdict import Verdict, Waiting, verdict
from watchdogs.result import Status
from watchdogs.scheduler.changes import reader
from watchdogs.scheduler.statusview import ago, gather, home_period, view_info
from watchdogs.slurmctl.runner import run_slurm
from watchdogs.state import snapshot
from watchdogs.state.store import StateStore
from watchdogs.state.watching import Watching
from watchdogs.textsafe import one_line

LOG = logging.getLogger("watchdogs.status")
PAGE = "report.html"
"""watchdogs.report.refresh.PAGE, spelled out: status imports only what it shows."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("status", help="what ran, when, with what result, and what runs next")
    parser.set_defaults(handler=status)


def status(args: argparse.Namespace) -> CommandResult:
    set_aside: dict[str, list[ConfigProblem]] = {}
    # A hung mount blocks every open() under it in the kernel, for good: the config's folders
    # and the state folder are asked first, in a child process with a deadline, so that
    # status says UNKNOWN rather than hangs.
    try:
        config = load_config(find_config_path(getattr(args, "config", None)), broken_channels=set_aside,
                             answers=unanswered)
    except ConfigError as exc:
        hung = [p for p in exc.problems if p.expected == NOT_ANSWERING]
        if not hung:
            raise
        return _not_answering(", ".join(f"{p.key} = {p.value}" for p in hung))
    state_dir = config.scheduler.state_dir
    free = _free_bytes(state_dir)  # in-process: the folder answered the config's probe just now
    # The view is looked at before anything opens it: a FIFO there would hang SQLite, and an
    # empty or cut-off file would read as "nothing recorded" (docs/state.md, "The view").
    problem = snapshot.problem_of(state_dir)
    store = None if problem is not None else reader(state_dir)
    try:
        now = time.time()
        data = gather(config, store, load_group(CHECKS_GROUP), now, run_slurm,
                      unread=None if problem is None else problem.words)
        data["view"] = view_info(store, now)
        data["alerts"] = _alerts(store, now)
    finally:
        if store is not None:
            store.close()  # now, not at exit: the CLI may leave without the interpreter's teardown
    data["view"]["problem"] = None if problem is None else {"kind": problem.kind, "words": problem.words}
    data["disabled_channels"], hidden = _disabled(config, set_aside)
    page = state_dir / PAGE
    data["report"] = str(page) if page.exists() else None
    watching = data["scheduler"]["watching"]
    alerts = data.get("alerts") or {}
    working = [n.name for n in config.notifiers if n.enabled and n.name not in data["disabled_channels"]]
    # No alert tables (nothing recorded, or a database from before them): no alert is open.
    # An unusable view: not known (its finding says why).
    by_status = alerts.get("by_status", {}) if problem is None else None
    period = home_period(watching_mode(data), config.scheduler.tick)
    found = verdict(watching, problem, by_status, alerts.get("waiting", ()), working, now, period, free)
    code, summary = _CODES[found.status.name], _summary(found, data, watching)
    data["scheduler"]["watching"] = _watching_data(watching, now)
    data["findings"] = [{"code": f.code, "status": f.status.name, "words": f.words} for f in found.findings]
    data["exit_code"] = code
    alerts.pop("waiting", None)
    text = summary + "\n" + render(data, config.scheduler.heartbeat_stale, watching, found)
    return CommandResult(text, data, exit_code=code, hidden=hidden)


_CODES = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}


def _not_answering(what: str) -> CommandResult:
    """UNKNOWN, Nagios-style: nothing about the watchdog can be told from this host."""
    text = (f"WATCHDOGS UNKNOWN: {what}: the filesystem does not answer (a hung or dead mount?); nothing "
            "about the watchdog can be told from this host | state_answers=0\n"
            "`ls` there would hang too: ask the admins, or run `watchdogs status` on a host where it answers")
    return CommandResult(text, {"exit_code": 3, "problem": f"{what}: the filesystem does not answer"},
                         exit_code=3)


def _free_bytes(state_dir: Path) -> int | None:
    """Bytes free to this user on the state folder's filesystem; None when it cannot be asked
    (no folder yet: nothing ever ran, which the watching finding says)."""
    try:
        st = os.statvfs(state_dir)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def watching_mode(data: dict[str, Any]) -> str | None:
    instance = data["scheduler"]["instance"]
    return None if instance is None else instance.get("mode")


def _summary(found: Verdict, data: dict[str, Any], watching: Watching) -> str:
    """The Nagios line: every finding, worst first, and the perfdata after `|`."""
    alerts = data.get("alerts") or {}
    by = alerts.get("by_status", {})
    age = data["view"].get("age")
    latest = data["scheduler"]["instance"]
    tick_age = data["now"] - float(latest["heartbeat"] or latest["started"]) if latest else None
    perf = (f"open={sum(by.values())} critical={by.get('CRITICAL', 0)} warning={by.get('WARNING', 0)} "
            f"unknown={by.get('UNKNOWN', 0)} outbox={alerts.get('outbox_pending', 0)}"
            + (f" view_age={age:.0f}s" if age is not None else "")
            + (f" tick_age={tick_age:.0f}s" if tick_age is not None else "")
            + f" blind={watching.blind_for(data['now']):.0f}s"
            + f" oldest_outbox={alerts.get('oldest_outbox') or 0:.0f}s"
            + f" view_ok={0 if data['view'].get('problem') else 1}")
    return f"WATCHDOGS {found.status.name}: {found.summary} | {perf}"


def _watching_data(watching: Watching, now: float) -> dict[str, Any]:
    return {"state": watching.state, "status": watching.status.name, "why": watching.why,
            "since": watching.since, "until": watching.until, "blind_for": watching.blind_for(now),
            "late_after": watching.limit}


def _alerts(store: StateStore | None, now: float) -> dict[str, Any] | None:
    if store is None:
        return None
    try:
        db = store.connection()
        by = {str(r[0]): int(r[1]) for r in db.execute(
            "SELECT status, COUNT(*) FROM alert_state WHERE notified != 'OK' GROUP BY status")}
        waiting = [Waiting(str(r[0]), float(r[1]), int(r[2]), r[3]) for r in db.execute(
            "SELECT channel, created, attempts, last_error FROM outbox WHERE delivered IS NULL"
            " ORDER BY created")]
        failing = [r[0] for r in db.execute(
            "SELECT channel FROM channel_health WHERE failing_since IS NOT NULL")]
    except sqlite3.Error as exc:  # a database from before views (legacy) without alert tables
        LOG.debug("no alert summary: %s", exc)
        return None
    oldest = now - waiting[0].created if waiting else None
    return {"open_alerts": sum(by.values()), "by_status": by, "outbox_pending": len(waiting),
            "failing_channels": failing, "waiting": waiting, "oldest_outbox": oldest}


def _disabled(config: Config, set_aside: dict[str, list[ConfigProblem]]
              ) -> tuple[dict[str, list[str]], tuple[str, ...]]:
    """Channels the scheduler leaves out (config problems, secrets it cannot read), why; and
    the secrets of the others, which a drop-in's output shown here must not reveal."""
    from notifiers.base import known_values
    from watchdogs.alerts.channels import build_working_channels

    reasons = {name: [f"{p.key}: expected {p.expected}" for p in found] for name, found in set_aside.items()}
    quiet = logging.getLogger("watchdogs.alerts")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # status says it below, once, not as a log line
    try:
        working, broken = build_working_channels(config, reasons)
        return broken, known_values(working.values())
    finally:
        quiet.setLevel(level)


def render(data: dict[str, Any], stale_after: float, watching: Watching, found: Verdict) -> str:
    now = data["now"]
    lines = _scheduler_lines(data["scheduler"], watching, now)
    lines += _view_lines(data.get("view") or {})
    for name, reasons in sorted(data.get("disabled_channels", {}).items()):
        lines.append(f"channel    !!! {name} DISABLED (alerts for it go nowhere): {'; '.join(reasons)}")
    if data["stop_file"] and watching.state not in ("stopped", "stopping"):
        lines.append(f"stop file  {data['stop_file']} exists: the chain stays stopped "
                     "(`watchdogs start` removes it)")
    if data.get("alerts"):
        a = data["alerts"]
        failing = f", failing channels: {', '.join(a['failing_channels'])}" if a["failing_channels"] else ""
        lines.append(f"alerts     {a['open_alerts']} open, {a['outbox_pending']} waiting in the outbox"
                     + failing)
    lines += [f"outbox     !!! {f.words}" for f in found.findings if f.code == "outbox"]
    lines.append("")
    lines += _item_table(data["items"], now)
    if data["refused"]:
        lines.append("")
        lines.append(f"NOT RUN ({len(data['refused'])}; each line says why):")
        lines += [f"  {one_line(str(r['path']), 500)}: {one_line(r['reason'])}" for r in data["refused"]]
    lines.append("")
    if data.get("report"):
        lines.append(f"page: {data['report']} (open it in a browser; the scheduler rewrites it every minute, "
                     "`watchdogs report` now)")
    lines.append(f"logs: runs in {data['logs']['runs']}/<item>/, scheduler in {data['logs']['scheduler']}/")
    return "\n".join(lines)


def _view_lines(view: dict[str, Any]) -> list[str]:
    lines = []
    if view.get("problem"):
        lines.append(f"state      !!! {view['problem']['words']}")
    elif view.get("source") == "view":
        lines.append(f"state      as of {ago(view['age'])}: written by the {view['writer']} "
                     f"on {view['host']}")
    locks = view.get("locks") or {}
    if locks and locks.get("kind") != "works":
        lines.append(f"locks      !!! {locks.get('note')}")
    return lines


def _scheduler_lines(s: dict[str, Any], watching: Watching, now: float) -> list[str]:
    inst = s["instance"]
    chain = ", ".join(f"job {j['job_id']} {j['state']}"
                      + (f" ({j['reason']})" if j["state"] == "PENDING" else "")
                      for j in s["chain_jobs"]) or "none"
    slurm = f"{s['job_name']} jobs: {chain}"
    if s["slurm_error"]:
        slurm = f"Slurm: cannot ask ({s['slurm_error']})"
    # `watchdogs stop` was someone's choice: said plainly, not as an alarm (still WARNING).
    loud = "" if watching.status is Status.OK or watching.state in ("stopped", "stopping") else "!!! "
    if watching.state in ("watching", "goes blind") and inst is not None:
        where = f"job {inst['job_id']}" if inst["job_id"] else f"pid {inst['pid']}"
        state = f" ({s['job_state']})" if s["job_state"] else ""
        head = [f"scheduler  running: {where}{state} on {inst['host']} since {ago(now - inst['started'])}; "
                f"heartbeat {ago(now - float(inst['heartbeat'] or inst['started']))}"]
        if watching.state == "goes blind":
            head.append(f"           !!! {watching.why}")
        return [*head, f"           {slurm}"]
    head = [f"scheduler  {loud}{watching.why}"]
    if inst is not None and watching.state == "blind" and inst["ended"] is not None:
        where = f"job {inst['job_id']}" if inst["job_id"] else f"pid {inst['pid']}"
        head.append(f"           not running: last instance ({where}) ended {ago(now - inst['ended'])}: "
                    f"{inst['reason']}")
    return [*head, f"           {slurm}"]


def _item_table(items: list[dict[str, Any]], now: float) -> list[str]:
    if not items:
        return ["no scheduled items: no [[check]] in the config and no drop-ins in cron.d"]
    rows = [("ITEM", "KIND", "SCHEDULE", "LAST RUN", "RESULT", "NEXT RUN", "SUMMARY")]
    for i in items:
        result = i["status"] or "-"
        if i["job_id"]:
            result += f" (job {i['job_id']} {i['job_state'] or 'gone'})"
        last = "running now" if i["running_since"] else ago(now - i["last_run"]) if i["last_run"] else "never"
        nxt = "-" if i["next_run"] is None else "now" if i["next_run"] < now + 1 else ago(now - i["next_run"])
        rows.append((one_line(i["item"], 200), i["kind"], i["schedule"], last, result, nxt,
                     one_line(i["summary"] or "", 1000)))
    widths = [max(len(r[c]) for r in rows) for c in range(6)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r[:6], widths, strict=True)) + "  " + r[6]
            for r in rows]
