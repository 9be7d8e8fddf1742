"""A real hung mount, made with nothing but the kernel's FUSE: mount a FUSE filesystem
whose server never answers. Every stat/statvfs/open under it blocks in the kernel (D state)
exactly like a dead NFS or Lustre mount, until the mount is torn down."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import PRIVILEGED


def fuse_available() -> str | None:
    """None when a hung mount can be made here; else why not."""
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse"
    return None


@contextmanager
def hung_mount(mount_point: Path) -> Iterator[Path]:
    """A FUSE mount whose server never answers, made by root (tests/privileged.py) for the
    test user; closing the helper's stdin detaches it and fails every blocked access."""
    mount_point.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(PRIVILEGED), "hung-mount", str(mount_point)]
    if os.geteuid() != 0:
        argv = ["sudo", "-n", *argv]
    holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None
    try:
        if holder.stdout.readline().strip() != "ready":
            raise OSError(f"hung mount on {mount_point} was not made (exit {holder.wait()})")
        yield mount_point
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
