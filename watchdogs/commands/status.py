"""`watchdogs status`: the scheduler's job and heartbeat, every scheduled item's last run,
result and next run, and refused drop-ins.

It reads the view the scheduler publishes each tick (docs/state.md), never the live
database, so it answers from any host and on a full disk, and says how old its view is.
Nagios contract: the first line is the summary with perfdata after `|`; the exit code is
the worst open alert (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN), and 2 for a stale heartbeat."""
from __future__ import annotations

import argparse
import logging
import sqlite3
import time
from typing import Any

from watchdogs import units
from watchdogs.commands.base import CommandResult
from watchdogs.config import Config, find_config_path, load_config
from watchdogs.errors import ConfigProblem
from watchdogs.plugins import CHECKS_GROUP, load_group
from watchdogs.scheduler.changes import reader
from watchdogs.scheduler.statusview import ago, gather, view_info
from watchdogs.slurmctl.runner import run_slurm
from watchdogs.state.store import StateStore
from watchdogs.textsafe import one_line

LOG = logging.getLogger("watchdogs.status")
PAGE = "report.html"
"""watchdogs.report.refresh.PAGE, spelled out: status imports only what it shows."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("status", help="what ran, when, with what result, and what runs next")
    parser.set_defaults(handler=status)


def status(args: argparse.Namespace) -> CommandResult:
    set_aside: dict[str, list[ConfigProblem]] = {}
    config = load_config(find_config_path(getattr(args, "config", None)), broken_channels=set_aside)
    store = reader(config.scheduler.state_dir)
    try:
        now = time.time()
        data = gather(config, store, load_group(CHECKS_GROUP), now, run_slurm)
        data["view"] = view_info(store, now)
        data["alerts"] = _alerts(store)
    finally:
        if store is not None:
            store.close()  # now, not at exit: the CLI may leave without the interpreter's teardown
    data["disabled_channels"], hidden = _disabled(config, set_aside)
    page = config.scheduler.state_dir / PAGE
    data["report"] = str(page) if page.exists() else None
    code, summary = _verdict(data)
    data["exit_code"] = code
    text = summary + "\n" + render(data, config.scheduler.heartbeat_stale)
    return CommandResult(text, data, exit_code=code, hidden=hidden)


_CODES = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
_RANK = {"OK": 0, "WARNING": 1, "UNKNOWN": 2, "CRITICAL": 3}


def _verdict(data: dict[str, Any]) -> tuple[int, str]:
    """The Nagios line: the worst open alert (a stale heartbeat counts as CRITICAL)."""
    alerts = data.get("alerts") or {}
    by = alerts.get("by_status", {})
    worst = max(by, key=lambda k: _RANK.get(k, 2), default="OK")
    sched = data["scheduler"]
    if sched["stale"]:
        worst = "CRITICAL"
    where = ("heartbeat STALE" if sched["stale"] else "stopped" if sched.get("stopped") else
             "stopping" if sched.get("stopping") else
             "running" if sched["running"] else "not running")
    opened = sum(by.values())
    counts = ", ".join(f"{n} {k}" for k, n in sorted(by.items(), key=lambda kv: -_RANK.get(kv[0], 2)))
    age = data["view"].get("age")
    perf = (f"open={opened} critical={by.get('CRITICAL', 0)} warning={by.get('WARNING', 0)} "
            f"unknown={by.get('UNKNOWN', 0)} outbox={alerts.get('outbox_pending', 0)}"
            + (f" view_age={age:.0f}s" if age is not None else ""))
    text = (f"WATCHDOGS {worst}: {opened} open alert{'s' if opened != 1 else ''}"
            + (f" ({counts})" if counts else "") + f"; scheduler {where} | {perf}")
    return _CODES.get(worst, 3), text


def _alerts(store: StateStore | None) -> dict[str, Any] | None:
    if store is None:
        return None
    try:
        db = store.connection()
        by = {str(r[0]): int(r[1]) for r in db.execute(
            "SELECT status, COUNT(*) FROM alert_state WHERE notified != 'OK' GROUP BY status")}
        pending = db.execute("SELECT COUNT(*) FROM outbox WHERE delivered IS NULL").fetchone()[0]
        failing = [r[0] for r in db.execute(
            "SELECT channel FROM channel_health WHERE failing_since IS NOT NULL")]
    except sqlite3.Error as exc:  # no alert tables yet, or an unreadable page: the schedule still shows
        LOG.debug("no alert summary: %s", exc)
        return None
    return {"open_alerts": sum(by.values()), "by_status": by, "outbox_pending": pending,
            "failing_channels": failing}


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


def render(data: dict[str, Any], stale_after: float) -> str:
    now = data["now"]
    lines = _scheduler_lines(data["scheduler"], now, stale_after)
    lines += _view_lines(data.get("view") or {})
    for name, reasons in sorted(data.get("disabled_channels", {}).items()):
        lines.append(f"channel    !!! {name} DISABLED (alerts for it go nowhere): {'; '.join(reasons)}")
    if data["stop_file"] and not data["scheduler"].get("stopped") and not data["scheduler"].get("stopping"):
        lines.append(f"stop file  {data['stop_file']} exists: the chain stays stopped "
                     "(`watchdogs start` removes it)")
    if data.get("alerts"):
        a = data["alerts"]
        failing = f", failing channels: {', '.join(a['failing_channels'])}" if a["failing_channels"] else ""
        lines.append(f"alerts     {a['open_alerts']} open, {a['outbox_pending']} waiting in the outbox"
                     + failing)
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
    if view.get("source") == "view":
        lines.append(f"state      as of {ago(view['age'])}: written by the {view['writer']} "
                     f"on {view['host']}")
    locks = view.get("locks") or {}
    if locks and locks.get("kind") != "works":
        lines.append(f"locks      !!! {locks.get('note')}")
    return lines


def _scheduler_lines(s: dict[str, Any], now: float, stale_after: float) -> list[str]:
    inst = s["instance"]
    chain = ", ".join(f"job {j['job_id']} {j['state']}"
                      + (f" ({j['reason']})" if j["state"] == "PENDING" else "")
                      for j in s["chain_jobs"]) or "none"
    slurm = f"{s['job_name']} jobs: {chain}"
    if s["slurm_error"]:
        slurm = f"Slurm: cannot ask ({s['slurm_error']})"
    if s.get("stopped"):
        return ["scheduler  STOPPED by `watchdogs stop`: no instance runs and no run is coming "
                "(`watchdogs start` resumes the chain)", f"           {slurm}"]
    if inst is None:
        return ["scheduler  has never run here", f"           {slurm}"]
    where = f"job {inst['job_id']}" if inst["job_id"] else f"pid {inst['pid']}"
    state = f" ({s['job_state']})" if s["job_state"] else ""
    if s["stale"]:
        head = (f"scheduler  !!! HEARTBEAT STALE: last beat {ago(s['heartbeat_age'])} (limit "
                f"{units.format_duration(stale_after)}): {where}{state} on {inst['host']} is NOT running. "
                "See its log, `squeue`, then `watchdogs start`.")
    elif s.get("stopping"):
        head = (f"scheduler  STOPPING (`watchdogs stop`): {where}{state} on {inst['host']} ends at its next "
                "tick; no successor and no run is coming (`watchdogs start` resumes the chain)")
    elif s["running"]:
        head = (f"scheduler  running: {where}{state} on {inst['host']} since {ago(now - inst['started'])}; "
                f"heartbeat {ago(s['heartbeat_age'])}")
    else:
        head = (f"scheduler  not running: last instance ({where}) ended {ago(now - inst['ended'])}: "
                f"{inst['reason']}")
    return [head, f"           {slurm}"]


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
