"""`watchdogs status`: the scheduler's job and heartbeat, every scheduled item's last run,
result and next run, and refused drop-ins. Exits 2 when the heartbeat is stale."""
from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from watchdogs import units
from watchdogs.commands.base import CommandResult
from watchdogs.config import Config, find_config_path, load_config
from watchdogs.errors import ConfigProblem
from watchdogs.plugins import CHECKS_GROUP, load_group
from watchdogs.scheduler.statusview import ago, gather
from watchdogs.slurmctl.runner import run_slurm
from watchdogs.state.store import StateStore

LOG = logging.getLogger("watchdogs.status")
PAGE = "report.html"
"""watchdogs.report.refresh.PAGE, spelled out: status imports only what it shows."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("status", help="what ran, when, with what result, and what runs next")
    parser.set_defaults(handler=status)


def status(args: argparse.Namespace) -> CommandResult:
    set_aside: dict[str, list[ConfigProblem]] = {}
    config = load_config(find_config_path(getattr(args, "config", None)), broken_channels=set_aside)
    store = StateStore(config.scheduler.state_dir)
    try:
        now = time.time()
        data = gather(config, store, load_group(CHECKS_GROUP), now, run_slurm)
        data["alerts"] = _alerts(store)
    finally:
        store.close()  # now, not at exit: the CLI may leave without the interpreter's teardown
    data["disabled_channels"] = _disabled(config, set_aside)
    page = config.scheduler.state_dir / PAGE
    data["report"] = str(page) if page.exists() else None
    stale = data["scheduler"]["stale"]
    return CommandResult(render(data, config.scheduler.heartbeat_stale), data, exit_code=2 if stale else 0)


def _alerts(store: StateStore) -> dict[str, Any] | None:
    try:
        from watchdogs.alerts import summary
        return summary(store)
    except Exception as exc:  # noqa: BLE001 - status must show the schedule even if alerts break
        LOG.debug("no alert summary: %s", exc)
        return None


def _disabled(config: Config, set_aside: dict[str, list[ConfigProblem]]) -> dict[str, list[str]]:
    """Channels the scheduler leaves out (config problems, secrets it cannot read), why."""
    from watchdogs.alerts.channels import build_working_channels

    reasons = {name: [f"{p.key}: expected {p.expected}" for p in found] for name, found in set_aside.items()}
    quiet = logging.getLogger("watchdogs.alerts")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # status says it below, once, not as a log line
    try:
        return build_working_channels(config, reasons)[1]
    finally:
        quiet.setLevel(level)


def render(data: dict[str, Any], stale_after: float) -> str:
    now = data["now"]
    lines = _scheduler_lines(data["scheduler"], now, stale_after)
    for name, reasons in sorted(data.get("disabled_channels", {}).items()):
        lines.append(f"channel    !!! {name} DISABLED (alerts for it go nowhere): {'; '.join(reasons)}")
    if data["stop_file"]:
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
        lines += [f"  {r['path']}: {r['reason']}" for r in data["refused"]]
    lines.append("")
    if data.get("report"):
        lines.append(f"page: {data['report']} (open it in a browser; the scheduler rewrites it every minute, "
                     "`watchdogs report` now)")
    lines.append(f"logs: runs in {data['logs']['runs']}/<item>/, scheduler in {data['logs']['scheduler']}/")
    return "\n".join(lines)


def _scheduler_lines(s: dict[str, Any], now: float, stale_after: float) -> list[str]:
    inst = s["instance"]
    chain = ", ".join(f"job {j['job_id']} {j['state']}"
                      + (f" ({j['reason']})" if j["state"] == "PENDING" else "")
                      for j in s["chain_jobs"]) or "none"
    slurm = f"{s['job_name']} jobs: {chain}"
    if s["slurm_error"]:
        slurm = f"Slurm: cannot ask ({s['slurm_error']})"
    if inst is None:
        return ["scheduler  has never run here", f"           {slurm}"]
    where = f"job {inst['job_id']}" if inst["job_id"] else f"pid {inst['pid']}"
    state = f" ({s['job_state']})" if s["job_state"] else ""
    if s["stale"]:
        head = (f"scheduler  !!! HEARTBEAT STALE: last beat {ago(s['heartbeat_age'])} (limit "
                f"{units.format_duration(stale_after)}): {where}{state} on {inst['host']} is NOT running. "
                "See its log, `squeue`, then `watchdogs start`.")
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
        rows.append((i["item"], i["kind"], i["schedule"], last, result, nxt, i["summary"] or ""))
    widths = [max(len(r[c]) for r in rows) for c in range(6)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r[:6], widths, strict=True)) + "  " + r[6]
            for r in rows]
