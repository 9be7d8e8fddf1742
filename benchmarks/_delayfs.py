#!/usr/bin/env python3
"""A read-only FUSE passthrough that waits DELAY seconds on every metadata request: a
stand-in for NFS or Lustre, where each stat is a round trip to a server.

    python benchmarks/_delayfs.py SOURCE MOUNT_POINT DELAY_S   (foreground, until unmounted)

The kernel is told to cache nothing (entry and attribute timeouts of 0), so every stat of
a walk reaches this server and waits, as on a network filesystem without attribute
caching. Requests are served by libfuse's threads (the waits overlap, as a server's do).
Needs root, /dev/fuse, libfuse3 (Debian: libfuse3-3) and mfusepy (the `bench` extra).
"""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

STAT_KEYS = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size",
             "st_atime", "st_mtime", "st_ctime", "st_blocks")


def serve(source: str, mount_point: str, delay: float) -> None:
    import mfusepy as fuse  # type: ignore[import-untyped]  # untyped; only the server needs it

    class DelayFS(fuse.Operations):  # type: ignore[misc]  # its base class is untyped
        use_ns = True

        def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
            time.sleep(delay)
            try:
                st = os.lstat(source + path)
            except OSError as exc:
                raise fuse.FuseOSError(exc.errno or errno.EIO) from None
            attrs = {k: getattr(st, k) for k in STAT_KEYS if k != "st_dev"}
            attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return attrs

        def readdir(self, path: str, fh: Any) -> list[str]:
            time.sleep(delay)
            return [".", "..", *os.listdir(source + path)]

        def readlink(self, path: str) -> str:
            return os.readlink(source + path)

    fuse.FUSE(DelayFS(), mount_point, foreground=True, ro=True, allow_other=True,
              attr_timeout=0, entry_timeout=0, negative_timeout=0)


@contextmanager
def delayed_mount(source: Path, mount_point: Path, delay: float) -> Iterator[Path]:
    """Mount `source` at `mount_point` through the delaying server for the duration."""
    mount_point.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen([sys.executable, __file__, str(source), str(mount_point), str(delay)],
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not os.path.ismount(mount_point):
            if server.poll() is not None or time.monotonic() > deadline:
                why = server.stderr.read() if server.stderr else ""
                raise RuntimeError(f"delayed FUSE mount failed: {why}")
            time.sleep(0.05)
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], float(sys.argv[3]))
