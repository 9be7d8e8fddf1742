"""What `watchdogs status` shows: the scheduler instance (job id, Slurm state, heartbeat
age), every scheduled item (last run, result, summary, next run), and refused drop-ins.

It asks Slurm once (one squeue of this user's jobs, finished ones the controller still
remembers included) and rescans cron.d itself, so refused files show even while no
scheduler runs.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING, Any

from watchdogs import units
from watchdogs.errors import WatchdogsError
from watchdogs.result import Status
from watchdogs.scheduler.items import all_items
from watchdogs.scheduler.prune import RUNS_DIR
from watchdogs.scheduler.records import Records
from watchdogs.schedules import Schedule, first_run
from watchdogs.slurmctl.runner import SlurmRunner
from watchdogs.state import watching

if TYPE_CHECKING:
    from watchdogs.config.model import Config
    from watchdogs.plugins import Registry
    from watchdogs.state.store import StateStore


def my_jobs(runner: SlurmRunner, env: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """job id -> {name, state, reason, start, end, submitted, comment}: one squeue call.
    The comment is last and split off whole (the chain's is `watchdogs:<role>:<job>`)."""
    reply = runner(["squeue", "--me", "--noheader", "--states=all", f"--format={JOB_FORMAT}"], env=env)
    jobs = {}
    for line in reply.stdout.splitlines():
        parts = line.strip().split("|", len(JOB_FIELDS))
        if len(parts) == len(JOB_FIELDS) + 1:
            jobs[parts[0]] = dict(zip(JOB_FIELDS, parts[1:], strict=True))
    return jobs


JOB_FORMAT = "%i|%j|%T|%r|%S|%e|%V|%k"
JOB_FIELDS = ("name", "state", "reason", "start", "end", "submitted", "comment")


def slurm_time(text: str) -> float | None:
    """A time as squeue prints it (local, no zone); None for N/A, Unknown, NONE."""
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def _role(comment: str) -> str:
    parts = comment.split(":")
    return parts[1] if len(parts) == 3 and parts[0] == "watchdogs" else ""


def chain_job(job_id: str, info: Mapping[str, str]) -> watching.ChainJob:
    return watching.ChainJob(job_id, info["state"], info.get("reason", ""), slurm_time(info.get("start", "")),
                             slurm_time(info.get("end", "")), slurm_time(info.get("submitted", "")),
                             _role(info.get("comment", "")))


def home_period(mode: str | None, tick: float) -> float:
    """How often the latest instance's home ticks: the tick for a chain or a foreground
    scheduler; a periodic home (scrontab, cron, a timer) runs once a minute at best."""
    return max(tick, 60.0) if mode in watching.PERIODIC_HOMES else tick


def judge(config: Config, instance: Mapping[str, Any] | None, jobs: dict[str, dict[str, str]] | None,
          slurm_error: str | None, now: float, unread: str | None = None) -> watching.Watching:
    """watchdogs.state.watching.judge with what status found: the latest instance, the
    chain's jobs (all of this user's jobs with the chain's name, finished ones included),
    and the stop file's age."""
    latest = None if instance is None else watching.Instance(
        instance["job_id"], str(instance["mode"] or "chain"), str(instance["host"] or "?"), instance["pid"],
        float(instance["started"]), instance["heartbeat"], instance["ended"], instance["reason"])
    name = config.scheduler.job_name
    # The instance's own job whatever its name: a foreground `watchdogs run` inside an
    # allocation records that job's id, and its job is how Slurm says it still runs.
    own = latest.job_id if latest is not None else None
    chain = None if jobs is None else [chain_job(j, info) for j, info in jobs.items()
                                       if info["name"] == name or j == own]
    try:
        stopped: float | None = os.stat(config.scheduler.stop_file).st_mtime
    except OSError:
        stopped = None
    period = home_period(latest.mode if latest else None, config.scheduler.tick)
    return watching.judge(latest, chain, now, period, config.scheduler.heartbeat_stale,
                          stopped_since=stopped, slurm_error=slurm_error,
                          warn_before=_warn_before(config), unread=unread)


def _warn_before(config: Config) -> float:
    # `handover_warn` arrives with the overlapping handover (issue 34); until then, its default.
    return float(getattr(config.scheduler, "handover_warn", watching.WARN_BEFORE_S))


def gather(config: Config, store: StateStore | None, registry: Registry, now: float, runner: SlurmRunner,
           env: Mapping[str, str] | None = None, uid: int | None = None, unread: str | None = None
           ) -> dict[str, Any]:
    """`store`: the state as this process may read it (the view the scheduler publishes),
    None when nothing was recorded, or when it cannot be read (`unread` says why)."""
    recorded = store is not None and _has(store, "sched_instances")
    records = Records(store) if recorded and store is not None else None
    try:
        jobs, slurm_error = my_jobs(runner, env), None
    except WatchdogsError as exc:
        jobs, slurm_error = {}, str(exc)
    scheduler = _scheduler(config, records.latest_instance() if records else None, jobs, slurm_error, now)
    stopping = config.scheduler.stop_file.exists() and scheduler["running"]
    if stopping and _ended_in_slurm(scheduler):
        # `stop` cancelled it: Slurm lists it as COMPLETING, or no more, before the instance
        # records its end; it is not running and nothing follows it
        scheduler["running"], stopping = False, False
    stopped = config.scheduler.stop_file.exists() and not scheduler["running"]
    scheduler["stopped"], scheduler["stopping"] = stopped, stopping
    items, refused = all_items(config, registry, uid)
    rows = records.items() if records else {}
    listed = []
    for item in items.values():
        row = rows.get(item.id, {})
        listed.append(_item(item.id, item.kind, item.schedule.describe(), row, jobs,
                            None if stopped or stopping else _next_run(item, row, scheduler["running"], now)))
    asked = None if slurm_error else jobs
    scheduler["watching"] = judge(config, scheduler["instance"], asked, slurm_error, now, unread)
    return {"now": now, "scheduler": scheduler, "items": sorted(listed, key=lambda i: i["item"]),
            "refused": [{"path": r.path, "reason": r.reason} for r in refused],
            "stop_file": str(config.scheduler.stop_file) if config.scheduler.stop_file.exists() else None,
            "logs": {"runs": str(config.scheduler.state_dir / RUNS_DIR),
                     "scheduler": str(config.scheduler.state_dir / "scheduler")}}


_LIVE = ("PENDING", "RUNNING", "CONFIGURING")
"""Slurm states of a chain job that may still run an item (COMPLETING is ending)."""


def _ended_in_slurm(scheduler: dict[str, Any]) -> bool:
    """Slurm answered and no longer runs the instance's job (a pid instance, or no answer from
    Slurm, stays as recorded: no guess)."""
    instance = scheduler["instance"] or {}
    answered = not scheduler["slurm_error"]
    return bool(instance.get("job_id")) and answered and scheduler["job_state"] not in _LIVE


def _has(store: StateStore, table: str) -> bool:
    return store.connection().execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None


def view_info(store: StateStore | None, now: float) -> dict[str, Any]:
    """How fresh the state shown is: when the view was written, where, by whom; and what
    the state folder gives for locks, as the scheduler found it."""
    info = getattr(store, "info", lambda: None)()
    found: dict[str, Any] = {"source": "view" if info else "database" if store else "none"}
    if info is not None:
        found.update(taken=info.taken, age=max(0.0, now - info.taken), host=info.host, writer=info.writer)
    locks = None
    if store is not None and _has(store, "kv"):
        locks = store.kv_get("state", "locks")
    found["locks"] = locks
    return found


def _scheduler(config: Config, instance: dict[str, Any] | None, jobs: dict[str, dict[str, str]],
               slurm_error: str | None, now: float) -> dict[str, Any]:
    name = config.scheduler.job_name
    chain = [{"job_id": j, **info} for j, info in jobs.items()
             if info["name"] == name and info["state"] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]
    found: dict[str, Any] = {"job_name": name, "chain_jobs": chain, "slurm_error": slurm_error,
                             "instance": instance, "running": False, "heartbeat_age": None,
                             "stale": False, "job_state": None}
    if instance is None:
        return found
    found["job_state"] = jobs.get(instance["job_id"] or "", {}).get("state")
    found["running"] = instance["ended"] is None
    if found["running"]:
        age = now - (instance["heartbeat"] or instance["started"])
        found["heartbeat_age"] = age
        found["stale"] = age > config.scheduler.heartbeat_stale
        if found["stale"]:
            found["running"] = False
    return found


def _next_run(item: Any, row: Mapping[str, Any], running: bool, now: float) -> float | None:
    """The running scheduler's own plan (None: nothing planned, e.g. @reboot after its run);
    else when a scheduler started now would run it."""
    if running:
        return None if row.get("next_run") is None else float(row["next_run"])
    anchor = row.get("anchor")
    when = first_run(item.schedule, _dt(anchor) if anchor else None, _dt(now), _zone_for(item.schedule))
    return when.timestamp()


def _zone_for(schedule: Schedule) -> tzinfo:
    """The local zone, for a cron expression (its times are wall-clock times). Intervals and
    @reboot do not depend on a zone, and asking tzlocal costs ~35 ms of a status that should
    answer at once, so those get UTC."""
    if schedule.kind != "cron":
        return timezone.utc
    from tzlocal import get_localzone

    return get_localzone()


def _item(item_id: str, kind: str, schedule: str, row: Mapping[str, Any], jobs: dict[str, dict[str, str]],
          next_run: float | None) -> dict[str, Any]:
    status = row.get("last_status")
    job_id = row.get("last_job_id")
    return {"item": item_id, "kind": kind, "schedule": schedule,
            "last_run": row.get("last_started"), "finished": row.get("last_finished"),
            "status": Status(status).name if status is not None else None,
            "summary": row.get("last_summary"), "log": row.get("last_log"),
            "running_since": row.get("running_since"), "next_run": next_run,
            "job_id": job_id, "job_state": jobs.get(job_id, {}).get("state") if job_id else None}


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


def ago(seconds: float | None) -> str:
    """-75 -> "in 1m15s", 7200 -> "2h ago"."""
    if seconds is None:
        return "-"
    text = units.format_duration(abs(seconds))
    return f"in {text}" if seconds < 0 else f"{text} ago"
