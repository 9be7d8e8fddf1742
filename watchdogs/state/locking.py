"""What the state folder's filesystem gives for locks, found once per process.

- WORKS: a local filesystem (every process that can see it shares this kernel), NFS (the
  Linux client sends flock as an NFS lock the server holds for every client), GPFS, CephFS,
  and Lustre mounted with `-o flock`.
- LOCAL: the lock is kept by this node only: FUSE filesystems (sshfs), Lustre with
  `-o localflock`, NFS with `-o local_lock=flock` or `local_lock=all` (the client then keeps
  flock to itself, nfs(5)), and network filesystems we do not know. Two processes on two hosts can
  both "hold" it.
- NONE: flock fails (ENOSYS on Lustre without `-o flock`, ENOLCK): nothing is locked.

A lock that is LOCAL or NONE never stops the chain or an alert (Slurm's `singleton` keeps
one chain instance); it only changes what may be done without the chain (`status` says it).
"""
from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

WORKS, LOCAL, NONE = "works", "local", "none"

_CLUSTER_FS = {"nfs", "nfs4", "gpfs", "ceph", "beegfs", "panfs", "wekafs"}
_LOCAL_FS = {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "overlay", "ramfs", "jfs",
             "reiserfs", "bcachefs", "vfat", "exfat"}


@dataclass(frozen=True)
class LockSupport:
    kind: str
    fstype: str
    mount: str
    note: str
    option: str = ""
    """The mount option that makes the lock local (`local_lock=flock`), "" when none does."""

    @property
    def across_hosts(self) -> bool:
        return self.kind == WORKS


def mount_of(path: Path, mountinfo: str | None = None) -> tuple[str, str, str]:
    """(mount point, filesystem type, mount options) of the mount holding `path`."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return "/", "unknown", ""
    real = os.path.realpath(path)
    best = ("/", "unknown", "")
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 3:
            continue
        point = fields[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, tail[0], fields[5] + "," + tail[2])
    return best


def classify(fstype: str, options: str) -> str:
    opts = set(options.split(","))
    if fstype == "lustre":
        return WORKS if "flock" in opts else LOCAL if "localflock" in opts else NONE
    if local_option(fstype, options):
        return LOCAL
    if fstype in _CLUSTER_FS or fstype in _LOCAL_FS:
        return WORKS
    return LOCAL  # fuse.sshfs and every filesystem we cannot vouch for


def local_option(fstype: str, options: str) -> str:
    """The NFS option that keeps flock on this client (nfs(5): `local_lock=flock|all`), or "".
    `local_lock=posix` leaves flock to the server, so it does not count."""
    if not fstype.startswith("nfs"):
        return ""
    return next((o for o in options.split(",") if o in ("local_lock=flock", "local_lock=all")), "")


def probe(state_dir: Path, mountinfo: str | None = None) -> LockSupport:
    point, fstype, options = mount_of(state_dir, mountinfo)
    kind = classify(fstype, options)
    path = Path(state_dir) / ".lock-probe"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            kind = NONE
        # EWOULDBLOCK: someone probes at the same moment; a lock that blocks is a lock
    option = local_option(fstype, options) if kind == LOCAL else ""
    return LockSupport(kind, fstype, point, _note(kind, fstype, option), option)


def _note(kind: str, fstype: str, option: str = "") -> str:
    if kind == WORKS:
        return f"locks work across hosts ({fstype})"
    if kind == LOCAL:
        fs = f"{fstype} mounted with {option}" if option else fstype
        return (f"locks hold on one host only ({fs}): a `watchdogs run --once` on another host can run "
                "an item while the chain runs it; changes from other hosts go through the chain")
    return (f"no locks ({fstype}: flock fails): a `watchdogs run --once` beside the chain can run an "
            "item twice; changes from other hosts go through the chain")
