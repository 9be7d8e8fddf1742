"""A real hung mount, made with nothing but the kernel's FUSE: mount a FUSE filesystem
whose server never answers. Every stat/statvfs/open under it blocks in the kernel (D state)
exactly like a dead NFS or Lustre mount, until the mount is torn down."""
from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MNT_DETACH = 2


def fuse_available() -> str | None:
    """None when a hung mount can be made here; else why not."""
    if os.geteuid() != 0:
        return "needs root to mount"
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse"
    return None


@contextmanager
def hung_mount(mount_point: Path) -> Iterator[Path]:
    libc = ctypes.CDLL(None, use_errno=True)
    mount_point.mkdir(parents=True, exist_ok=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    options = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"wdtest-hung", str(mount_point).encode(), b"fuse.wdtest", 0, options) != 0:
        errno = ctypes.get_errno()
        os.close(fd)
        raise OSError(errno, f"mount fuse: {os.strerror(errno)}", str(mount_point))
    try:
        yield mount_point
    finally:
        # Detach, then close the device: the kernel aborts the connection and every
        # process blocked on the mount gets an error and can finish.
        libc.umount2(str(mount_point).encode(), MNT_DETACH)
        os.close(fd)
