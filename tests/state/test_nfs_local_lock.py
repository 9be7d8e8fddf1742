"""NFS mounted with `local_lock=flock` or `local_lock=all` keeps flock on the client
(nfs(5)): two nodes can both hold the state folder's lock. Recorded /proc/self/mountinfo
lines (an NFS mount cannot be made here) whose mount point is the test's own folder."""
from __future__ import annotations

from pathlib import Path

import pytest

from watchdogs.state import locking

ROOT = "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
# As a Linux 6.x client writes it (super options after the filesystem source)
NFS = ("98 22 0:51 / {point} rw,relatime shared:60 - {fs} filer:/home rw,vers={vers},rsize=1048576,"
       "wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.5,"
       "local_lock={local},addr=10.0.0.1\n")


def probed(tmp_path: Path, fs: str, vers: str, local: str) -> locking.LockSupport:
    table = ROOT + NFS.format(point=tmp_path, fs=fs, vers=vers, local=local)
    return locking.probe(tmp_path, table)


@pytest.mark.parametrize(("fs", "vers", "local"), [("nfs", "3", "flock"), ("nfs", "3", "all"),
                                                   ("nfs4", "4.2", "flock"), ("nfs4", "4.2", "all")])
def test_nfs_with_local_flock_holds_the_lock_on_one_node_only(tmp_path: Path, fs: str, vers: str,
                                                               local: str) -> None:
    found = probed(tmp_path, fs, vers, local)
    assert found.kind == locking.LOCAL and not found.across_hosts
    assert f"locks hold on one host only ({fs} mounted with local_lock={local})" in found.note


@pytest.mark.parametrize("local", ["none", "posix"])
def test_nfs_that_leaves_flock_to_the_server_locks_across_hosts(tmp_path: Path, local: str) -> None:
    found = probed(tmp_path, "nfs4", "4.2", local)
    assert found.kind == locking.WORKS and found.across_hosts and found.option == ""
