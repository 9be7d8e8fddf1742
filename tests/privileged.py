#!/usr/bin/env python3
"""The few things the suite needs root for, run for the unprivileged test user through sudo.

    tests/privileged.py mount-tmpfs PATH SIZE [--inodes N] [--read-only]
    tests/privileged.py umount PATH
    tests/privileged.py node-stop CLUSTER_DIR NODE
    tests/privileged.py node-start CLUSTER_DIR NODE
    tests/privileged.py node-kill CLUSTER_DIR NODE    # a power loss: slurmd and the node's steps
    tests/privileged.py give-away PATH        # chown to nobody: "another user's file"
    tests/privileged.py as-peer ACT PATH [ARG]  # the test user's group mate `wdpeer` acts:
        write PATH TEXT | mkfifo PATH | mkdir PATH | socket PATH | symlink PATH TARGET | chmod PATH MODE
    tests/privileged.py hung-mount PATH       # a FUSE mount nobody answers, until stdin closes
    tests/privileged.py scontrol CLUSTER_DIR update NodeName=N State=DRAIN Reason=...
    tests/privileged.py scontrol CLUSTER_DIR create|delete reservation ...   # an admin's acts
    tests/privileged.py peer-jobs CLUSTER_DIR submit PARTITION COUNT [PRIORITY]  # `wdpeer` queues
        COUNT 1-CPU `sleep` jobs; an administrator ranks them at PRIORITY (a full cluster of others)
    tests/privileged.py peer-jobs CLUSTER_DIR cancel [JOBID ...]  # end wdpeer's jobs (all, or those)
    tests/privileged.py cpu-quota PID PERCENT # a cgroup v1 CPU quota on the caller's process
    tests/privileged.py cpu-quota-end PID     # its processes back to the root group, group removed

Tests run as an ordinary user, as users do; mounting a filesystem and stopping a root daemon
are what an administrator (or a failing disk) does to them. tests/suite.py allows exactly this
script to the test user in /etc/sudoers.d (see `tests.helpers.privileged`). Every path must
lie in the calling user's own pytest folder, so the rule cannot be used to mount over or give
away anything else. Only the standard library.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import pwd
import re
import subprocess
import sys
from pathlib import Path

DEV_CLUSTER = Path(__file__).resolve().parent.parent / "slurm" / "dev-cluster"
MNT_DETACH = 2
SIZE = re.compile(r"^[0-9]+[kmg]?$")


def caller() -> pwd.struct_passwd:
    """The user sudo ran us for (root itself when run directly)."""
    uid = int(os.environ.get("SUDO_UID", os.getuid()))
    return pwd.getpwuid(uid)


def own_path(raw: str) -> Path:
    """A path inside a folder of the caller's directly under /tmp (pytest's pytest-of-USER,
    or a --basetemp the caller made), or any path when root runs us directly."""
    path = Path(os.path.realpath(raw))
    user = caller()
    if user.pw_uid == 0:
        return path
    parts = path.parts
    top = Path("/tmp", parts[2]) if len(parts) > 3 and parts[1] == "tmp" else None
    if top is None or top.is_symlink() or top.lstat().st_uid != user.pw_uid:
        sys.exit(f"privileged: {path} is not inside a folder of {user.pw_name}'s in /tmp")
    return path


def mount_tmpfs(path: Path, size: str, inodes: int | None, read_only: bool) -> None:
    if not SIZE.match(size):
        sys.exit(f"privileged: size {size!r} is not like 4m")
    user = caller()
    opts = [f"size={size}", f"uid={user.pw_uid}", f"gid={user.pw_gid}", "mode=0700"]
    if inodes is not None:
        opts.append(f"nr_inodes={inodes}")
    if read_only:
        opts.append("ro")
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(opts), "wdtest", str(path)], check=True)


def hung_mount(path: Path) -> None:
    """Mount a FUSE filesystem at `path` whose server never answers, usable by the caller
    (user_id= is the caller, so no allow_other is needed), print "ready", and hold it until
    stdin closes; then detach it and close the device, which fails every blocked access."""
    user = caller()
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    options = f"fd={fd},rootmode=40000,user_id={user.pw_uid},group_id={user.pw_gid}".encode()
    if libc.mount(b"wdtest-hung", str(path).encode(), b"fuse.wdtest", 0, options) != 0:
        errno = ctypes.get_errno()
        sys.exit(f"privileged: mount fuse on {path}: {os.strerror(errno)}")
    try:
        print("ready", flush=True)
        sys.stdin.read()
    finally:
        libc.umount2(str(path).encode(), MNT_DETACH)
        os.close(fd)


def roots_cluster(cluster_dir: str) -> Path:
    """A dev cluster folder root made: its PIDs and slurm.conf are trusted with root's power."""
    for path in (Path(cluster_dir), Path(cluster_dir) / "pids.json", Path(cluster_dir) / "slurm.conf"):
        if path.lstat().st_uid != 0 or path.is_symlink():
            sys.exit(f"privileged: {path} is not root's: not a dev cluster")
    return Path(cluster_dir)


# What an administrator does to a user's cluster in the tests: drain/resume nodes, reservations.
ADMIN_ACTS = (("update",), ("create", "reservation"), ("delete",))


def scontrol(cluster_dir: str, args: list[str]) -> None:
    folder = roots_cluster(cluster_dir)
    if not any(tuple(args[:len(act)]) == act for act in ADMIN_ACTS) or (
            args[0] == "update" and not args[1:2][0].lower().startswith("nodename=")):
        sys.exit(f"privileged: scontrol {' '.join(args)} is not an allowed admin act")
    if args[0] == "delete" and not args[1:2][0].lower().startswith("reservationname="):
        sys.exit("privileged: only reservations may be deleted")
    # A cluster of another Slurm release has its clients in <cluster>/bin (slurm/dev-cluster).
    own = folder / "bin" / "scontrol"
    binary = str(own) if own.exists() else "scontrol"
    env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"))
    done = subprocess.run([binary, *args], env=env, check=False)
    if done.returncode != 0:
        sys.exit(done.returncode)


def dev_cluster(cluster_dir: str, *args: str) -> None:
    roots_cluster(cluster_dir)
    env = dict(os.environ, WATCHDOGS_CLUSTER_DIR=cluster_dir)
    subprocess.run([sys.executable, str(DEV_CLUSTER), *args], check=True, env=env,
                   stdout=subprocess.DEVNULL)


CPU_CGROUP = Path("/sys/fs/cgroup/cpu")


def own_process(pid: int) -> int:
    """`pid`, when it is a process of the caller (any when root runs us directly)."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        sys.exit(f"privileged: no process {pid}")
    if caller().pw_uid not in (0, uid):
        sys.exit(f"privileged: process {pid} is not the caller's")
    return pid


def cpu_quota(pid: int, percent: int) -> None:
    """A slow node for a straggler test: the process gets `percent` % of one CPU (CFS quota)."""
    group = CPU_CGROUP / f"wd-test-quota-{pid}"
    group.mkdir(exist_ok=True)
    (group / "cpu.cfs_period_us").write_text("100000")
    (group / "cpu.cfs_quota_us").write_text(str(1000 * max(1, min(percent, 100))))
    (group / "cgroup.procs").write_text(str(pid))


def cpu_quota_end(pid: int) -> None:
    group = CPU_CGROUP / f"wd-test-quota-{pid}"
    if not group.is_dir():
        return
    for member in (group / "cgroup.procs").read_text().split():
        try:
            (CPU_CGROUP / "cgroup.procs").write_text(member)
        except OSError:
            continue   # gone meanwhile
    group.rmdir()


PEER = "wdpeer"
"""A second unprivileged user in the test user's group (tests/suite.py ensure_peer): the
attacker of the trust tests, a group mate in a shared project space."""
PEER_ACTS = ("write", "mkfifo", "mkdir", "socket", "symlink", "chmod")


def as_peer(act: str, raw: str, arg: str | None) -> None:
    """Do one act as PEER on the entry `raw` of a folder of the caller's. Root opens the
    folder (O_PATH); the peer then acts relative to it (mkdirat, openat, ...), so only the
    folder's own mode decides whether the peer may: its ancestors (pytest's 0700 folders)
    stand for the path to a shared project space, which a group mate can reach."""
    given = Path(raw)
    folder = own_path(str(given.parent))
    peer = pwd.getpwnam(PEER)
    dir_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        os.close(dir_fd)
        code = os.waitstatus_to_exitcode(status)
        if code:
            sys.exit(code)
        return
    try:
        os.setgroups([])
        os.setgid(peer.pw_gid)
        os.setuid(peer.pw_uid)
        _peer_act(act, dir_fd, given.name, arg)
    except OSError as exc:
        print(f"privileged: as {PEER}: {act} {raw}: {exc.strerror or exc}", file=sys.stderr)
        os._exit(13)
    os._exit(0)


def _peer_act(act: str, dir_fd: int, name: str, arg: str | None) -> None:
    if act == "write":
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o664, dir_fd=dir_fd)
        os.write(fd, (arg or "").encode("utf-8", "surrogateescape"))
        os.close(fd)
    elif act == "mkfifo":
        os.mkfifo(name, 0o664, dir_fd=dir_fd)
    elif act == "mkdir":
        os.mkdir(name, 0o775, dir_fd=dir_fd)
    elif act == "symlink":
        os.symlink(arg or "/nonexistent", name, dir_fd=dir_fd)
    elif act == "chmod":
        os.chmod(name, int(arg or "0", 8), dir_fd=dir_fd)
    elif act == "socket":
        import socket

        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(f"/proc/self/fd/{dir_fd}/{name}")


PEER_SLEEP_S = 900
"""A filler job's life: longer than any test that fills the cluster, shorter than a forgotten one."""


def _client(folder: Path, name: str) -> str:
    own = folder / "bin" / name  # a cluster of another release has its clients here
    return str(own) if own.exists() else name


def peer_jobs(cluster_dir: str, act: str, args: list[str]) -> None:
    """Another user's jobs on the caller's dev cluster: the full cluster of issue 34, where
    jobs the watchdog's user cannot touch take every CPU and rank above its successor."""
    folder = roots_cluster(cluster_dir)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_CONF": str(folder / "slurm.conf")}
    peer = pwd.getpwnam(PEER)
    if act == "cancel":
        if not all(a.isdigit() for a in args):
            sys.exit("privileged: peer-jobs cancel takes job ids only")
        # -u: only the peer's jobs, even when an id given is someone else's.
        subprocess.run([_client(folder, "scancel"), "-u", PEER, *args], env=env, check=False)
        return
    if act != "submit" or len(args) not in (2, 3) or not all(a.isdigit() for a in args[1:]) \
            or not re.fullmatch(r"[A-Za-z0-9_-]+", args[0]):
        sys.exit("privileged: peer-jobs submit PARTITION COUNT [PRIORITY]")
    ids = []
    for _ in range(int(args[1])):
        done = subprocess.run([_client(folder, "sbatch"), "--parsable", f"--partition={args[0]}",
                               "--cpus-per-task=1", "--mem=100M", "--time=20", "--job-name=wdpeer-filler",
                               "--output=/dev/null", f"--wrap=sleep {PEER_SLEEP_S}"],
                              env=env, cwd="/tmp", user=peer.pw_uid, group=peer.pw_gid, extra_groups=[],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"privileged: sbatch as {PEER}: {done.stderr.strip()}")
        ids.append(done.stdout.strip().split(";")[0])
    if len(args) == 3:  # an administrator's act: what multifactor priority does to others' jobs
        for job in ids:
            subprocess.run([_client(folder, "scontrol"), "update", f"JobId={job}", f"Priority={args[2]}"],
                           env=env, check=True)
    print(" ".join(ids))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="privileged")
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mount-tmpfs")
    m.add_argument("path")
    m.add_argument("size")
    m.add_argument("--inodes", type=int)
    m.add_argument("--read-only", action="store_true")
    sub.add_parser("umount").add_argument("path")
    for name in ("node-stop", "node-start", "node-kill"):
        n = sub.add_parser(name)
        n.add_argument("cluster_dir")
        n.add_argument("node", choices=("node1", "node2", "node3"))
    sub.add_parser("give-away").add_argument("path")
    sub.add_parser("hung-mount").add_argument("path")
    p = sub.add_parser("as-peer")
    p.add_argument("act", choices=PEER_ACTS)
    p.add_argument("path")
    p.add_argument("arg", nargs="?")
    q = sub.add_parser("cpu-quota")
    q.add_argument("pid", type=int)
    q.add_argument("percent", type=int)
    sub.add_parser("cpu-quota-end").add_argument("pid", type=int)
    j = sub.add_parser("peer-jobs")
    j.add_argument("cluster_dir")
    j.add_argument("act", choices=("submit", "cancel"))
    j.add_argument("args", nargs="*")
    s = sub.add_parser("scontrol")
    s.add_argument("cluster_dir")
    s.add_argument("args", nargs="+")
    opts = parser.parse_args(argv)
    if opts.cmd == "mount-tmpfs":
        mount_tmpfs(own_path(opts.path), opts.size, opts.inodes, opts.read_only)
    elif opts.cmd == "umount":
        subprocess.run(["umount", "-l", str(own_path(opts.path))], check=False)
    elif opts.cmd in ("node-stop", "node-start", "node-kill"):
        dev_cluster(opts.cluster_dir, opts.cmd, opts.node)
    elif opts.cmd == "scontrol":
        scontrol(opts.cluster_dir, opts.args)
    elif opts.cmd == "peer-jobs":
        peer_jobs(opts.cluster_dir, opts.act, opts.args)
    elif opts.cmd == "cpu-quota":
        cpu_quota(own_process(opts.pid), opts.percent)
    elif opts.cmd == "cpu-quota-end":
        cpu_quota_end(opts.pid)
    elif opts.cmd == "as-peer":
        as_peer(opts.act, opts.path, opts.arg)
    elif opts.cmd == "hung-mount":
        hung_mount(own_path(opts.path))
    else:
        # The name itself, not what it points to: giving away a symlink is giving the link.
        given = Path(opts.path)
        os.lchown(own_path(str(given.parent)) / given.name, 65534, 65534)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
