"""Two sshfs mounts of one folder over loopback: two "hosts" sharing a network filesystem.

Each mount is its own FUSE filesystem with its own attribute and directory cache and its
own (node-local) locks, as two NFS clients are: an flock taken through one mount is not
seen through the other. Needs root to start sshd and to mount (FUSE `allow_other`, so the
unprivileged user that runs the watchdog can use both mounts).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TwoMounts:
    export: Path
    """The folder on the "server"."""
    a: Path
    """The chain's host (compute node)."""
    b: Path
    """The login node."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PACKAGES = ("sshfs", "openssh-server", "openssh-client", "fuse3")


def missing_tools() -> list[str]:
    return [t for t in ("sshfs", "sshd", "ssh-keygen", "fusermount3") if shutil.which(t) is None
            and not Path(f"/usr/sbin/{t}").exists()]


def ensure_tools() -> list[str]:
    """Install Debian's sshfs and openssh-server when they are missing (root, apt-get);
    returns what is still missing."""
    if missing_tools() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES], env=env,
                       capture_output=True, check=False, timeout=900)
    return missing_tools()


def _sshd(base: Path, port: int) -> subprocess.Popen[bytes]:
    """sshd on 127.0.0.1:`port` with a throwaway host key, root's login by key only."""
    hostkey, userkey = base / "host_ed25519", base / "user_ed25519"
    for key in (hostkey, userkey):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (base / "authorized_keys").write_text((base / "user_ed25519.pub").read_text())
    os.chmod(base / "authorized_keys", 0o600)
    conf = base / "sshd_config"
    conf.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\n"
                    f"AuthorizedKeysFile {base}/authorized_keys\nPasswordAuthentication no\n"
                    "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
                    f"PidFile {base}/sshd.pid\nSubsystem sftp internal-sftp\n")
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation folder sshd insists on
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    with open(base / "sshd.log", "wb") as log:
        proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(conf)], stderr=log)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"sshd did not listen: {(base / 'sshd.log').read_text()}")


def _mount(base: Path, port: int, export: Path, point: Path, owner: tuple[int, int]) -> None:
    """sshfs logs in as root on the "server"; every file shows as `owner`'s locally (as on
    a real NFS home), so the watchdog runs as that ordinary user."""
    point.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["sshfs", f"root@127.0.0.1:{export}", str(point), "-p", str(port),
         "-o", f"IdentityFile={base}/user_ed25519", "-o", "StrictHostKeyChecking=no",
         "-o", f"UserKnownHostsFile={base}/known_hosts", "-o", "allow_other",
         "-o", f"uid={owner[0]},gid={owner[1]}", "-o", "reconnect"], check=True, timeout=30)


@contextmanager
def two_mounts(base: Path, owner: tuple[int, int] = (0, 0)) -> Iterator[TwoMounts]:
    base.mkdir(parents=True, exist_ok=True)
    export, a, b = base / "export", base / "host-a", base / "host-b"
    export.mkdir(mode=0o700)
    port = free_port()
    sshd = _sshd(base, port)
    mounted: list[Path] = []
    try:
        for point in (a, b):
            _mount(base, port, export, point, owner)
            mounted.append(point)
        yield TwoMounts(export, a, b)
    finally:
        for point in mounted:
            subprocess.run(["fusermount3", "-u", "-z", str(point)], check=False)
        sshd.terminate()
        sshd.wait(10)
