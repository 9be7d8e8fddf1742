"""What `watchdogs status` shows: the scheduler instance (job id, Slurm state, heartbeat
age), every scheduled item (last run, result, summary, next run), and refused drop-ins.

It asks Slurm once (one squeue of this user's jobs, finished ones the controller still
remembers included) and rescans cron.d itself, so refused files show even while no
scheduler runs.
"""
from __future__ import annotations

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

if TYPE_CHECKING:
    from watchdogs.config.model import Config
    from watchdogs.plugins import Registry
    from watchdogs.state.store import StateStore


def my_jobs(runner: SlurmRunner, env: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """job id -> {name, state, reason, start}: one squeue call."""
    reply = runner(["squeue", "--me", "--noheader", "--states=all", "--format=%i|%j|%T|%r|%S"], env=env)
    jobs = {}
    for line in reply.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5:
            jobs[parts[0]] = dict(zip(("name", "state", "reason", "start"), parts[1:], strict=True))
    return jobs


def gather(config: Config, store: StateStore | None, registry: Registry, now: float, runner: SlurmRunner,
           env: Mapping[str, str] | None = None, uid: int | None = None) -> dict[str, Any]:
    """`store`: the state as this process may read it (the view the scheduler publishes),
    None when nothing was recorded."""
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
