"""`disk`: bytes and inodes of a partition or a directory, with a forecast.

Usage comes from the best source (watchdogs.fsprobe.usage); every probe is bounded, so a
dead mount is UNKNOWN "filesystem not responding". Each complete reading is kept in the
state database; a line fitted through the last `forecast_window` says when it will be full.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, ClassVar

from watchdogs.checks.base import Check
from watchdogs.config import options as o
from watchdogs.config.options import Limit, Option
from watchdogs.fsprobe import DEFAULT_WORKERS
from watchdogs.fsprobe.bounded import probe
from watchdogs.humanize import count, moment, percent
from watchdogs.humanize import size as format_size
from watchdogs.result import CheckResult, Metric, Status, worst

if TYPE_CHECKING:
    # `validate` and `status` build this class for its option table only: the usage
    # sources (quota tools, mount table) and the forecast are imported by the methods
    # that measure.
    from watchdogs.checks.context import TickContext
    from watchdogs.fsprobe import usage as fs
    from watchdogs.fsprobe.forecast import Forecast

SOURCES = ("auto", "statvfs", "scan", "lfs", "mmlsquota", "quota")
HISTORY_DDL = (
    "CREATE TABLE IF NOT EXISTS disk_history (check_name TEXT NOT NULL, t REAL NOT NULL,"
    " bytes_used REAL NOT NULL, inodes_used REAL, PRIMARY KEY (check_name, t))",
)
DAY = 86400.0  # as fsprobe.forecast's, which this module imports only to forecast
KEEP_HISTORY_S = 8 * DAY
LEVELS = "check.disk.levels"
"""kv namespace: each disk check's capacities and levels, as `watchdogs report` draws them."""


class DiskCheck(Check):
    type_name = "disk"
    options: ClassVar[Mapping[str, Option]] = {
        "path": Option(o.path, required=True, help="a mount point or a directory"),
        "source": Option(o.choice(*SOURCES), default="auto",
                         help="auto: the site's quota tool (lfs, mmlsquota), a scan for a directory "
                              "quota, else statvfs"),
        "user": Option(o.string, help="whose quota (default: the user running watchdogs)"),
        "device": Option(o.string, help="GPFS device for mmlsquota (default: the mount's source)"),
        "fileset": Option(o.string, help="GPFS fileset: its quota instead of the user's"),
        "bytes_limit": Option(o.size, help="the capacity to measure against (a directory quota)"),
        "inodes_limit": Option(o.count, help="the inode capacity to measure against"),
        "usable": Option(o.percent, default=100.0, help="share of the byte capacity really usable"),
        "warn": Option(o.limit(o.size), default=Limit(percent=80.0), below="crit",
                       help="share of the (usable) capacity, or a size used"),
        "crit": Option(o.limit(o.size), default=Limit(percent=90.0),
                       help="share of the (usable) capacity, or a size used"),
        "inodes_warn": Option(o.limit(o.count), default=Limit(percent=80.0), below="inodes_crit",
                              help="share of the inode capacity, or a count"),
        "inodes_crit": Option(o.limit(o.count), default=Limit(percent=90.0),
                              help="share of the inode capacity, or a count"),
        "warn_days": Option(o.number, above="crit_days",
                            help="warn when the forecast says full within this many days"),
        "crit_days": Option(o.number, help="critical when the forecast says full within this many days"),
        "forecast_window": Option(o.duration, default=DAY, help="the history the forecast is fitted on"),
        "checkpoint_size": Option(o.size, help="say how many more checkpoints fit; no room: CRITICAL"),
        "checkpoint_dir": Option(o.path, help="or measure the newest entry of this folder"),
        "count": Option(o.choice("allocated", "apparent"), default="allocated",
                        help="scan: allocated blocks (du -s, what quotas charge) or apparent sizes (du -sb)"),
        "probe_timeout": Option(o.timeout, default=15.0,
                                help='a filesystem slower than this is "not responding"'),
        "scan_timeout": Option(o.timeout, default=60.0,
                               help="a scan stops here: what it counted is a lower bound"),
        "scan_workers": Option(o.integer(1, 64), default=DEFAULT_WORKERS,
                               help="find processes in parallel; more for NFS/Lustre"),
    }

    def run(self, ctx: TickContext) -> CheckResult:
        from watchdogs.fsprobe import usage as fs

        use = self._usage()
        cap_b = _capacity(self.opts.get("bytes_limit") or use.bytes_total, self.opts["usable"])
        cap_i = self.opts.get("inodes_limit") or use.inodes_total
        sb = fs.level(use.bytes_used, cap_b, self.opts["warn"], self.opts["crit"])
        si = fs.level(use.inodes_used, cap_i, self.opts["inodes_warn"], self.opts["inodes_crit"])
        parts = [_describe("bytes", use.bytes_used, cap_b, sb, format_size,
                           self.opts["warn"], self.opts["crit"]),
                 _describe("inodes", use.inodes_used, cap_i, si, _count,
                           self.opts["inodes_warn"], self.opts["inodes_crit"])]
        statuses = [sb, si]
        if use.complete:
            history = self._record(ctx, use)
            self._remember_levels(ctx, cap_b, cap_i)
            for label, series, cap in (("bytes", 0, cap_b), ("inodes", 1, cap_i)):
                said = self._forecast(ctx, [(t, v[series]) for t, *v in history], cap, label)
                if said is not None:
                    statuses.append(said[0])
                    parts.append(said[1])
        room = self._room(use, cap_b)
        if room is not None:
            statuses.append(room[0])
            parts.append(room[1])
        return self._result(use, statuses, [p for p in parts if p], cap_b, cap_i)

    def _usage(self) -> fs.Usage:
        from watchdogs.fsprobe import usage as fs
        from watchdogs.slurmctl.users import current_user

        settings = fs.Settings(
            source=self.opts["source"], user=self.opts.get("user") or current_user(),
            device=self.opts.get("device"), fileset=self.opts.get("fileset"),
            directory_quota=bool(self.opts.get("bytes_limit") or self.opts.get("inodes_limit")),
            timeout=self.opts["probe_timeout"], scan_timeout=self.opts["scan_timeout"],
            scan_workers=self.opts["scan_workers"], apparent=self.opts["count"] == "apparent")
        return fs.measure(str(self.opts["path"]), settings)

    def _record(self, ctx: TickContext, use: fs.Usage) -> list[tuple[float, float, float | None]]:
        """Store this reading and return the history within the forecast window."""
        now, window = ctx.now.timestamp(), self.opts["forecast_window"]
        ctx.store.ensure_schema("checks.disk", 1, HISTORY_DDL)
        with ctx.store.transaction() as db:
            db.execute("INSERT OR REPLACE INTO disk_history VALUES (?, ?, ?, ?)",
                       (self.name, now, use.bytes_used, use.inodes_used))
            db.execute("DELETE FROM disk_history WHERE check_name = ? AND t < ?",
                       (self.name, now - max(KEEP_HISTORY_S, 2 * window)))
            rows = db.execute("SELECT t, bytes_used, inodes_used FROM disk_history WHERE "
                              "check_name = ? AND t >= ? ORDER BY t", (self.name, now - window))
            return [(r[0], r[1], r[2]) for r in rows.fetchall()]

    def _remember_levels(self, ctx: TickContext, cap_b: float | None, cap_i: float | None) -> None:
        """The capacities and levels in bytes and inodes, for `watchdogs report`'s lines
        (the history holds only what was used). Unchanged from tick to tick: no write."""
        o = self.opts
        ctx.store.kv_put(LEVELS, self.name, {
            "bytes_cap": cap_b, "inodes_cap": cap_i, "window": o["forecast_window"],
            "warn": o["warn"].resolve(cap_b), "crit": o["crit"].resolve(cap_b),
            "inodes_warn": o["inodes_warn"].resolve(cap_i), "inodes_crit": o["inodes_crit"].resolve(cap_i)})

    def _forecast(self, ctx: TickContext, history: list[tuple[float, float | None]],
                  capacity: float | None, label: str) -> tuple[Status, str] | None:
        from watchdogs.fsprobe.forecast import forecast

        points = [(t, v) for t, v in history if v is not None]
        window = self.opts["forecast_window"]
        found: Forecast | None = forecast(points, capacity, ctx.now.timestamp(), window) \
            if capacity else None
        if found is None:
            return None
        status, crossed = Status.OK, ""
        days_left = found.seconds_to_full / DAY if found.seconds_to_full is not None else math.inf
        for key, level in (("warn_days", Status.WARNING), ("crit_days", Status.CRITICAL)):
            if self.opts.get(key) is not None and days_left <= self.opts[key]:
                status, crossed = level, f" {level.name} ({key} {self.opts[key]:g})"
        if found.seconds_to_full is None and status is Status.OK and label == "inodes":
            return None  # a shrinking inode count is not worth a word
        # When, as a time of day a reader can plan around, and which level it crossed.
        when = "" if not found.seconds_to_full or found.seconds_to_full <= 0 else \
            f" (around {moment(ctx.now + timedelta(seconds=found.seconds_to_full))})"
        return status, f"{label} {found.describe(window)}{when}{crossed}"

    def _room(self, use: fs.Usage, capacity: float | None) -> tuple[Status, str] | None:
        each = self.opts.get("checkpoint_size") or self._measure_checkpoint()
        if not each or capacity is None:
            return None
        room = max(0, math.floor((capacity - use.bytes_used) / each))
        if room == 0:
            return Status.CRITICAL, f"no room for another checkpoint of {format_size(each)}"
        return Status.OK, f"room for {room} more checkpoint{'s' if room != 1 else ''} of {format_size(each)}"

    def _measure_checkpoint(self) -> float | None:
        from watchdogs.fsprobe import usage as fs

        folder = self.opts.get("checkpoint_dir")
        if folder is None:
            return None
        timeout = self.opts["probe_timeout"]
        newest = probe("newest_entry", {"directory": str(folder)}, timeout, str(folder))
        if newest is None:
            return None
        return fs.scan_usage(newest, self.opts["scan_timeout"] + timeout, self.opts["scan_timeout"],
                             self.opts["scan_workers"], apparent=True).bytes_used

    def _result(self, use: fs.Usage, statuses: list[Status], parts: list[str], cap_b: float | None,
                cap_i: float | None) -> CheckResult:
        status = worst(statuses)
        where = str(self.opts["path"])
        summary = f"{where}: " + "; ".join(parts) + f" [{use.source}]"
        if not use.complete:
            summary += " (at least: the scan stopped at scan_timeout)"
            if status is Status.OK:
                status = Status.UNKNOWN
        metrics = [_metric("bytes_used", use.bytes_used, "B", cap_b, self.opts["warn"], self.opts["crit"])]
        if use.inodes_used is not None:
            metrics.append(_metric("inodes_used", use.inodes_used, "", cap_i, self.opts["inodes_warn"],
                                   self.opts["inodes_crit"]))
        details = (use.note,) if use.note else ()
        context = {"path": where, "source": use.source}
        return CheckResult(status, summary, details, tuple(metrics), context,
                           fingerprint="/".join(s.name for s in statuses))


def _capacity(total: float | None, usable: float) -> float | None:
    return None if total is None else total * usable / 100


def _count(value: float) -> str:
    return count(round(value))


def _describe(label: str, used: float | None, capacity: float | None, status: Status,
              fmt: Callable[[float], str], warn: Limit, crit: Limit) -> str:
    if used is None:
        return ""
    text = f"{label} {fmt(used)} used"
    if capacity:
        text = f"{label} {fmt(used)} of {fmt(capacity)} used ({percent(used, capacity)})"
    if status not in (Status.WARNING, Status.CRITICAL):
        return text
    # The level crossed, as configured: "31 % CRITICAL" alone leaves the reader asking why.
    level = crit if status is Status.CRITICAL else warn
    shown = f"{level.percent:g} %" if level.percent is not None else fmt(level.amount or 0)
    return f"{text} {status.name} (threshold {shown})"


def _metric(label: str, value: float, unit: str, capacity: float | None, warn: Limit,
            crit: Limit) -> Metric:
    def show(x: float | None) -> str:
        return "" if x is None else f"{x:.0f}"
    return Metric(label, value, unit, show(warn.resolve(capacity)), show(crit.resolve(capacity)), "0",
                  show(capacity))

