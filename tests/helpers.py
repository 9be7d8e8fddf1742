"""Small helpers shared by the tests: run a command, wait for a condition, Slurm look-ups."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from watchdogs.slurmctl.runner import run_slurm
from watchdogs.slurmctl.sacct import run_sacct

T = TypeVar("T")


def sh(*argv: str, timeout: float = 30.0, check: bool = True) -> str:
    """Run argv (never a shell string) and return stdout. A failure shows the command's stderr,
    which CalledProcessError's message leaves out: CI keeps only the report."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode:
        raise AssertionError(f"{argv!r} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.3,
             what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what} not met within {timeout}s")


def job_state(job_id: str) -> str:
    """JobState from `scontrol show job` ('' when the controller no longer knows the job)."""
    out = sh("scontrol", "show", "job", job_id, check=False)
    for token in out.split():
        if token.startswith("JobState="):
            return token.split("=", 1)[1]
    return ""


def cancel(*job_ids: str) -> None:
    if job_ids:
        sh("scancel", *job_ids, check=False)


def accounted(job_id: str) -> bool:
    """Accounting (slurmdbd) has recorded the job's end: sacct lags slurmctld by a moment."""
    record = run_sacct([job_id], 30.0, None, run_slurm).get(job_id)
    return record is not None and record.finished


def unix_socket_at(path: Path) -> socket.socket:
    """A socket bound at `path`, however deep: a socket's address holds at most 107 bytes,
    and CI's pytest folders are longer, so it is bound through a short name of its folder
    (/proc/self/fd/N/name). The caller closes it."""
    sock = socket.socket(socket.AF_UNIX)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{folder}/{path.name}")
    except OSError:
        sock.close()
        raise
    finally:
        os.close(folder)
    return sock


def free_rendezvous_port() -> int:
    """A free port below the kernel's ephemeral range (32768 up): a training's rendezvous port
    and the templates' in-place offsets (+997 each, three restarts) must not land where any
    outgoing connection (sacct, SMTP, another cluster's job) may already hold one. Bound to
    be sure it is free now."""
    import random

    for port in random.sample(range(20000, 28000), 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError("no free port in 20000-28000")


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel's pick for port 0)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def left_the_queue(job_id: str) -> bool:
    """squeue no longer lists the job: on 24.11 and later accounting records a cancel while
    squeue still shows the job completing, so a look in between still sees it."""
    listed = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%i"], capture_output=True,
                            text=True, timeout=30, check=False)
    return listed.returncode == 0 and not listed.stdout.strip() or "Invalid job id" in listed.stderr


PRIVILEGED = Path(__file__).resolve().parent / "privileged.py"


def privileged(*args: str) -> None:
    """Run tests/privileged.py as root: directly when the suite runs as root, else through the
    sudo rule tests/suite.py writes for the test user (mounts, stopping a node's slurmd)."""
    argv = [sys.executable, str(PRIVILEGED), *args]
    if os.geteuid() != 0:
        argv = ["sudo", "-n", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"privileged {' '.join(args)} failed: {(done.stderr or done.stdout).strip()}")


PEER = "wdpeer"


def as_peer(act: str, path: Path, arg: str | None = None) -> None:
    """The test user's group mate (`wdpeer`) does one act on `path` in a folder of the
    test's: write TEXT, mkfifo, mkdir, socket, symlink TARGET, chmod MODE (tests/privileged.py).
    It may only when the folder's mode lets the group write: the attack is real."""
    privileged("as-peer", act, str(path), *([arg] if arg is not None else []))


def admin_scontrol(*args: str) -> None:
    """`scontrol ARGS` as the cluster's administrator (drain/resume a node, a reservation):
    what a site's admins do to a user's jobs, which the user cannot."""
    privileged("scontrol", str(Path(os.environ["SLURM_CONF"]).parent), *args)


@contextmanager
def tmpfs(point: Path, size: str, inodes: int | None = None, read_only: bool = False) -> Iterator[Path]:
    """A real tmpfs at `point`, owned by the user running the test, unmounted afterwards."""
    point.mkdir(parents=True, exist_ok=True)
    extra = ["--inodes", str(inodes)] if inodes is not None else []
    extra += ["--read-only"] if read_only else []
    privileged("mount-tmpfs", str(point), size, *extra)
    try:
        yield point
    finally:
        privileged("umount", str(point))
