"""How full is a path, from the best source available, and what the levels say about it.

Sources, best first: the site's quota tool (lfs for Lustre, mmlsquota for GPFS, or `quota`
when asked), statvfs, and the bounded parallel scan for directory quotas.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from watchdogs.config.options import Limit
from watchdogs.fsprobe import quota
from watchdogs.fsprobe.bounded import FsError, FsNotResponding, probe, run_bounded
from watchdogs.fsprobe.mounts import MOUNTINFO, Mount, mount_of, parse_mountinfo
from watchdogs.humanize import count, duration
from watchdogs.result import Status


@dataclass(frozen=True)
class Usage:
    source: str
    bytes_used: float
    bytes_total: float | None
    inodes_used: float | None
    inodes_total: float | None
    complete: bool = True
    """False when a scan ran out of time: the figures are lower bounds."""
    note: str = ""


def level(used: float | None, capacity: float | None, warn: Limit, crit: Limit) -> Status:
    """Percent levels are of the capacity; absolute levels are amounts used."""
    if used is None:
        return Status.OK
    crit_at, warn_at = crit.resolve(capacity), warn.resolve(capacity)
    if crit_at is not None and used >= crit_at:
        return Status.CRITICAL
    if warn_at is not None and used >= warn_at:
        return Status.WARNING
    return Status.OK


def statvfs_usage(path: str, timeout: float) -> Usage:
    r = probe("statvfs", {"path": path}, timeout, path)
    return Usage("statvfs", r["bytes_used"], r["bytes_total"], r["inodes_used"], r["inodes_total"])


def scan_usage(path: str, timeout: float, time_limit: float, workers: int, apparent: bool) -> Usage:
    """The du fallback. The child stops itself at `time_limit`; `timeout` is the hard stop."""
    r = probe("scan", {"root": path, "time_limit": time_limit, "workers": workers}, timeout, path)
    used = r["apparent_bytes"] if apparent else r["allocated_bytes"]
    note = f"scan of {count(r['inodes'])} inodes in {duration(r['elapsed'])}"
    if r["errors"]:
        note += f", {r['errors']} unreadable"
    return Usage("scan", used, None, r["inodes"], None, r["complete"], note)


def quota_usage(tool: str, path: str, user: str, timeout: float, mount: Mount | None,
                device: str | None = None, fileset: str | None = None) -> Usage:
    """Run the site's quota tool (bounded: it talks to the same servers as the mount)."""
    if tool == "lfs":
        report = quota.parse_lfs_quota(run_bounded(quota.lfs_argv(user, path), timeout, path))
    elif tool == "mmlsquota":
        dev = device or (mount.source if mount else path)
        text = run_bounded(quota.mmlsquota_argv(user, dev, fileset), timeout, path)
        report = quota.parse_mmlsquota_y(text, "FILESET" if fileset else "USR", fileset or user)
    else:
        names = (mount.source, mount.mount_point) if mount else ()
        found = quota.parse_quota_w(run_bounded(quota.quota_argv(user), timeout, path), names)
        if found is None:
            raise FsError(f"{path}: no quota for {user}")
        report = found
    note = f"{tool} quota of {fileset or user}" + (f"; over soft limit, grace {report.grace}"
                                                   if report.over else "")
    return Usage(tool, report.bytes_used, report.bytes_limit, report.files_used, report.files_limit,
                 note=note)


@dataclass(frozen=True)
class Settings:
    source: str = "auto"
    user: str = ""
    device: str | None = None
    fileset: str | None = None
    directory_quota: bool = False
    """A bytes/inodes limit of its own is configured: a directory to count, not a filesystem."""
    timeout: float = 15.0
    scan_timeout: float = 60.0
    scan_workers: int = 8
    apparent: bool = False


def auto_source(fs_type: str | None, directory_quota: bool) -> str:
    if fs_type == "lustre":
        return "lfs"
    if fs_type == "gpfs":
        return "mmlsquota"
    if directory_quota:
        return "scan"  # only counting the tree says how much a directory holds
    return "statvfs"


def measure(path: str, settings: Settings) -> Usage:
    """Usage from the configured source; with "auto", the site's quota tool when the path is
    on Lustre or GPFS (statvfs when the tool is missing or no quota is set), the scan for a
    directory with its own limit, else statvfs."""
    mount = _mount(path)
    chosen = settings.source
    if chosen == "auto":
        chosen = auto_source(mount.fs_type if mount else None, settings.directory_quota)
    if chosen == "scan":
        return scan_usage(path, settings.scan_timeout + settings.timeout, settings.scan_timeout,
                          settings.scan_workers, settings.apparent)
    if chosen == "statvfs":
        return statvfs_usage(path, settings.timeout)
    try:
        found = quota_usage(chosen, path, settings.user, settings.timeout, mount, settings.device,
                            settings.fileset)
    except FsNotResponding:
        raise
    except (FsError, ValueError) as exc:
        if settings.source != "auto":
            raise FsError(f"{path}: {chosen}: {exc}") from None
        return replace(statvfs_usage(path, settings.timeout), note=f"{chosen} unusable ({exc})")
    if found.bytes_total is None and not settings.directory_quota:
        return replace(statvfs_usage(path, settings.timeout),
                       note=f"no {chosen} quota set for {settings.fileset or settings.user}")
    return found


def _mount(path: str) -> Mount | None:
    try:
        return mount_of(path, parse_mountinfo(MOUNTINFO.read_text()))
    except OSError:
        return None
