"""`watchdogs doctor`'s checks of the host: the config, the Slurm release, accounting, and
the state folder (its filesystem, whether locks work there and how far they reach).

Each check is a function returning Findings; the Slurm ones take the command runner, so
they can be run on recorded output. A Finding that is not OK always says what to do.
"""
from __future__ import annotations

import errno
import fcntl
import os
import pwd
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdogs.config import Config, find_config_path, load_config
from watchdogs.errors import ConfigError, SlurmError, WatchdogsError
from watchdogs.fsprobe.answers import unanswered
from watchdogs.fsprobe.mounts import MOUNTINFO, Mount, mount_of
from watchdogs.result import Status
from watchdogs.slurmctl.runner import SlurmRunner
from watchdogs.state import locking

SUPPORTED = ((22, 5), (26, 5))
"""The Slurm releases the watchdog is tested against (22.05, 24.11 and 26.05 in CI; README)."""
NETWORK_FS = ("nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "ceph", "glusterfs", "beegfs", "9p",
              "afs", "panfs", "wekafs", "fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "fuse.beegfs")
DOCS = "docs/doctor.md"


@dataclass(frozen=True)
class Finding:
    """One answer of the doctor: what was looked at, how it stands, and the fix."""

    area: str
    status: Status
    summary: str
    fix: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"area": self.area, "status": self.status.name, "summary": self.summary, "fix": self.fix,
                **({"facts": dict(self.facts)} if self.facts else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(str(data["area"]), Status[str(data["status"])], str(data["summary"]),
                   str(data.get("fix") or ""), dict(data.get("facts") or {}))


def check_config(config_arg: str | None) -> tuple[Config | None, Finding]:
    try:
        config = load_config(find_config_path(config_arg), answers=unanswered)
    except ConfigError as exc:
        problems = [str(p) for p in exc.problems]
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        return None, Finding("config", Status.CRITICAL, f"invalid: {shown}",
                             "fix the keys named (`watchdogs validate` lists every problem)",
                             {"problems": problems})
    except WatchdogsError as exc:
        return None, Finding("config", Status.CRITICAL, str(exc),
                             "give the config with --config or $WATCHDOGS_CONFIG")
    names = ", ".join(n.name for n in config.notifiers) or "none"
    return config, Finding("config", Status.OK, f"{config.path}: valid, {len(config.checks)} checks, "
                                                 f"channels: {names}", facts={"path": str(config.path)})


def parse_release(text: str) -> tuple[int, int] | None:
    """(major, minor) from `sinfo -V` ("slurm 24.11.1", "slurm-wlm 22.05.8")."""
    found = re.search(r"(\d+)\.(\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def check_slurm(runner: SlurmRunner) -> Finding:
    try:
        text = runner(["sinfo", "-V"], timeout=15).stdout.strip()
    except SlurmError as exc:
        return Finding("slurm", Status.CRITICAL, f"Slurm commands do not work here: {exc}",
                       "put Slurm's commands on PATH (module load slurm) and set SLURM_CONF "
                       "if the site needs it")
    release = parse_release(text)
    facts: dict[str, Any] = {"release": text}
    try:
        ping = runner(["scontrol", "ping"], timeout=15).stdout.strip()
    except SlurmError as exc:
        return Finding("slurm", Status.CRITICAL, f"{text}; the controller does not answer: {exc}",
                       "the scheduler job cannot submit its successor without slurmctld: ask the admins",
                       facts)
    facts["controller"] = " ".join(ping.split())
    low, high = SUPPORTED
    span = f"{low[0]}.{low[1]:02d} to {high[0]}.{high[1]:02d}"
    if release is None or not low <= release <= high:
        return Finding("slurm", Status.WARNING,
                       f"{text}: outside the releases tested ({span}); controller up",
                       f"the checks read Slurm's output as {span} print it: watch `watchdogs "
                       "status` for UNKNOWN results on this release and report them", facts)
    return Finding("slurm", Status.OK, f"{text} (tested: {span}); controller up", facts=facts)


def check_accounting(runner: SlurmRunner, job_id: str | None) -> Finding:
    """sacct about a job: this job when run inside one (accounting records it while it
    runs), else the user's latest job in the last week."""
    argv = ["sacct", "-X", "-n", "-P", "-o", "JobID,State"]
    # -u: root's sacct (and an operator's) lists everyone's jobs; the question is about ours.
    argv += ["-j", job_id] if job_id else ["-S", "now-7days", "-u", pwd.getpwuid(os.getuid()).pw_name]
    try:
        lines = [line for line in runner(argv, timeout=30).stdout.splitlines() if line.strip()]
    except SlurmError as exc:
        disabled = "accounting storage is disabled" in str(exc).lower()
        return Finding("accounting", Status.WARNING,
                       "Slurm accounting is disabled" if disabled else f"sacct does not answer: {exc}",
                       "without accounting, `why a job ended` reports only what squeue saw last: "
                       "ask the admins for slurmdbd (AccountingStorageType=accounting_storage/slurmdbd)")
    if not lines:
        what = f"job {job_id}" if job_id else "any job of yours in the last 7 days"
        status = Status.WARNING if job_id else Status.OK
        return Finding("accounting", status, f"sacct answers but knows nothing of {what}",
                       "slurmdbd may lag behind; if it stays so, ask the admins" if job_id else "")
    job, _, state = lines[-1].partition("|")
    mine = " (this doctor job; accounting may lag a moment)" if job_id else ""
    # The state alone: sacct's "CANCELLED by 1001" names a uid, which says nothing here.
    word = state.split()[0] if state.split() else state
    return Finding("accounting", Status.OK, f"sacct answers: job {job} {word}{mine}",
                   facts={"job": job, "state": state})


def _mounts() -> list[Mount]:
    """The mounts, from mountinfo (what the locks are is watchdogs.state.locking's to say)."""
    found = []
    for line in MOUNTINFO.read_text().splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if sep and len(fields) >= 6 and len(tail) >= 2:
            found.append(Mount(fields[4].replace("\\040", " "), tail[0], tail[1].replace("\\040", " ")))
    return found


def try_locks(folder: Path) -> tuple[str, str]:
    """(flock, posix): "works" or why not, on a probe file in `folder` (removed after)."""
    probe = folder / f".doctor-lock-{os.getpid()}"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        results = []
        for lock in (fcntl.flock, fcntl.lockf):
            try:
                lock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                lock(fd, fcntl.LOCK_UN)
                results.append("works")
            except OSError as exc:
                results.append(errno.errorcode.get(exc.errno or 0, str(exc.errno)))
        return results[0], results[1]
    finally:
        os.close(fd)
        probe.unlink()


def check_state_dir(state_dir: Path) -> list[Finding]:
    folder = state_dir
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    note = "" if folder == state_dir else f" (not created yet; probed in {folder})"
    try:
        found = mount_of(str(folder), _mounts())
    except OSError:
        found = None
    fs = found.fs_type if found else "unknown"
    facts: dict[str, Any] = {"path": str(state_dir), "fs_type": fs,
                             "source": found.source if found else None}
    network = fs in NETWORK_FS or fs.startswith("fuse.")
    facts["network"] = network
    where = f"{state_dir}{note} on {fs}" + (f" ({found.source})" if found else "")
    try:
        flock, posix = try_locks(folder)
    except OSError as exc:
        return [Finding("state", Status.CRITICAL, f"{where}: cannot write there: {exc.strerror or exc}",
                        "set [scheduler] state_dir to a folder you can write, on storage every node mounts",
                        facts)]
    support = _lock_support(folder, state_dir)
    scope = {locking.WORKS: "shared", locking.LOCAL: "this node only"}.get(support.kind, "none")
    facts |= {"flock": flock, "posix_lock": posix, "lock_kind": support.kind, "lock_scope": scope}
    database = ("network filesystem: the chain alone writes the database, login-node commands "
                "read its snapshot" if network else "local filesystem: every node that runs the "
                "chain must see this folder")
    facts["database"] = database
    state = Finding("state", Status.OK, f"{where}; {database}", facts=facts)
    return [state, _lock_finding(support, network, posix, folder, facts)]


def _lock_support(folder: Path, state_dir: Path) -> locking.LockSupport:
    """What the scheduler itself will conclude about locks there (watchdogs.state.locking),
    from the same mount table; its probe file is removed when the folder is not the state
    folder yet (a parent of it, such as the checkout)."""
    litter = folder / ".lock-probe"
    mine = folder != state_dir and not litter.exists()
    try:
        return locking.probe(folder, MOUNTINFO.read_text())
    finally:
        if mine:
            litter.unlink(missing_ok=True)


def _lock_finding(support: locking.LockSupport, network: bool, posix: str, folder: Path,
                  facts: dict[str, Any]) -> Finding:
    if support.kind == locking.NONE:
        return Finding("locks", Status.WARNING, f"{support.note} (in {folder}); POSIX locks: {posix}",
                       "alerting goes on without the lock (Slurm's singleton keeps one chain); on "
                       "Lustre ask for the `flock` mount option", facts)
    if support.kind == locking.LOCAL:
        remount = (f"ask the admins to mount {support.mount} without {support.option} (nfs(5)); until then "
                   if support.option else "")
        return Finding("locks", Status.WARNING, support.note,
                       remount + "a second instance on another host would not be kept out by the lock; "
                       "Slurm's singleton dependency is what keeps one chain; keep `run --once` to the "
                       "chain's host", facts)
    scope = f"across hosts ({support.fstype})" if network else \
        f"({support.fstype}, a local filesystem: one kernel holds every lock)"
    return Finding("locks", Status.OK, f"flock works {scope}; POSIX locks: {posix}", facts=facts)


def check_shared_folders(config: Config) -> list[Finding]:
    """The folders the watchdog writes into besides its state folder (metrics_dir, a
    logfile channel's folder): a WARNING each when others can write them (`validate`'s
    warning, as a finding)."""
    from watchdogs.commands.validate import shared_folder_warnings

    return [Finding("shared folders", Status.WARNING, warning.split(" (fix", 1)[0],
                    "unless shared on purpose: chmod go-w on it (docs/trust.md)")
            for warning in shared_folder_warnings(config)]
