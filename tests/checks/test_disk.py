"""`disk` on real filesystems: a tmpfs of known size and inode count filled past warn and
crit (bytes, then inodes), the scan fallback against GNU du, the forecast, checkpoints,
a hung mount, and the quota tools' outputs."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.checks.conftest import tick, write_config
from tests.checks.hung_mount import fuse_available, hung_mount
from tests.helpers import tmpfs
from watchdogs.result import CheckResult, Status
from watchdogs.state.store import StateStore

MiB = 1024 * 1024


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB tmpfs with 200 inodes, mounted for this test only (by root, through
    tests/privileged.py; owned and filled by the test user)."""
    with tmpfs(tmp_path / "fs", "4m", inodes=200) as mnt:
        yield mnt


def fill(path: Path, size: int) -> None:
    with path.open("ab") as fh:
        fh.write(b"\1" * size)


def disk_check(**opts: object) -> str:
    keys = "\n".join(f"{k} = {json.dumps(v)}" for k, v in opts.items())
    return f'[[check]]\nname = "disk"\ntype = "disk"\n{keys}\n'


def run_disk(tmp_path: Path, store: StateStore, now: datetime | None = None, **opts: object) -> CheckResult:
    return tick(write_config(tmp_path, disk_check(**opts)), store, now=now)[0]["disk"]


def test_bytes_past_warn_then_past_crit(tmp_path: Path, store: StateStore, small_fs: Path) -> None:
    assert run_disk(tmp_path, store, path="fs").status is Status.OK
    fill(small_fs / "data", int(3.4 * MiB))
    warned = run_disk(tmp_path, store, path="fs")
    assert warned.status is Status.WARNING
    assert "bytes 3.4 MiB of 4.0 MiB used (85 %) WARNING" in warned.summary and "[statvfs]" in warned.summary
    fill(small_fs / "data", int(0.4 * MiB))
    assert run_disk(tmp_path, store, path="fs").status is Status.CRITICAL


def test_inodes_past_warn_then_past_crit_with_bytes_fine(tmp_path: Path, store: StateStore,
                                                         small_fs: Path) -> None:
    for i in range(165):
        (small_fs / f"f{i}").touch()
    warned = run_disk(tmp_path, store, path="fs")
    assert warned.status is Status.WARNING
    assert "inodes 166 of 200 used (83 %) WARNING" in warned.summary
    assert "bytes 0 B of 4.0 MiB used (0 %);" in warned.summary
    for i in range(165, 185):
        (small_fs / f"f{i}").touch()
    assert run_disk(tmp_path, store, path="fs").status is Status.CRITICAL


def test_usable_share_and_absolute_levels(tmp_path: Path, store: StateStore, small_fs: Path) -> None:
    fill(small_fs / "data", int(2.8 * MiB))
    assert run_disk(tmp_path, store, path="fs").status is Status.OK  # 70% of 4 MiB
    usable = run_disk(tmp_path, store, path="fs", usable="80%")
    assert usable.status is Status.WARNING and "of 3.2 MiB used (88 %)" in usable.summary
    absolute = run_disk(tmp_path, store, path="fs", warn="1MiB", crit="2MiB")
    assert absolute.status is Status.CRITICAL


def test_forecast_from_history_says_when_full_and_warns_ahead(tmp_path: Path, store: StateStore,
                                                              small_fs: Path) -> None:
    now = datetime.now().astimezone()
    opts = {"path": "fs", "warn_days": 1, "crit_days": 0.1}
    for hours_ago, size in ((20, 1 * MiB), (10, 1 * MiB)):
        fill(small_fs / "data", size)
        run_disk(tmp_path, store, now=now - timedelta(hours=hours_ago), **opts)
    fill(small_fs / "data", 1 * MiB)
    result = run_disk(tmp_path, store, now=now, **opts)
    assert "bytes full in ~10 h 00 min at the rate of the last 1 d 00 h" in result.summary
    assert result.status is Status.WARNING  # 75% used: only the forecast warns
    # The reader sees when (a time to plan around) and which level the forecast crossed.
    around = re.search(r"\(around (\d{4}-\d\d-\d\d \d\d:\d\d) ", result.summary)
    assert around, result.summary
    said = datetime.strptime(around[1], "%Y-%m-%d %H:%M").replace(tzinfo=now.tzinfo)
    assert abs(said - (now + timedelta(hours=10))) < timedelta(minutes=2)
    assert result.summary.endswith("WARNING (warn_days 1) [statvfs]"), result.summary


def test_room_for_more_checkpoints_measured_from_the_newest(tmp_path: Path, store: StateStore,
                                                            small_fs: Path) -> None:
    ckpt = small_fs / "ckpt"
    (ckpt / "step-100").mkdir(parents=True)
    fill(ckpt / "step-100" / "model.pt", 2 * MiB)
    (ckpt / "step-200").mkdir()
    fill(ckpt / "step-200" / "model.pt", 512 * 1024)
    result = run_disk(tmp_path, store, path="fs", checkpoint_dir="fs/ckpt")
    # 512 KiB of data plus the folder entry itself, as du counts it
    assert re.search(r"room for 2 more checkpoints of 512\.\d KiB", result.summary)
    fill(ckpt / "step-200" / "optim.pt", 1200 * 1024)
    full = run_disk(tmp_path, store, path="fs", checkpoint_dir="fs/ckpt", warn="99%", crit="100%")
    assert full.status is Status.CRITICAL
    assert "no room for another checkpoint of 1.7 MiB" in full.summary


def make_tree(root: Path) -> None:
    """Nested folders, hard links, a symlink, a sparse file and empty folders."""
    for d in range(12):
        sub = root / f"d{d}" / "inner"
        sub.mkdir(parents=True)
        for f in range(25):
            (sub / f"f{f}").write_bytes(b"x" * (f * 517 + d))
    os.link(root / "d0" / "inner" / "f24", root / "d1" / "hard")
    os.link(root / "d0" / "inner" / "f24", root / "d2" / "hard")
    (root / "d3" / "link").symlink_to("../d0/inner/f1")
    with (root / "sparse").open("wb") as fh:
        fh.truncate(5 * MiB)
        fh.write(b"data")
    (root / "empty" / "deeper").mkdir(parents=True)


def du(*args: str) -> int:
    return int(subprocess.run(["du", "-s", *args], capture_output=True, text=True, check=True)
               .stdout.split()[0])


def test_scan_agrees_with_gnu_du_on_bytes_blocks_and_inodes(tmp_path: Path) -> None:
    from watchdogs.fsprobe.scan import scan_tree
    root = tmp_path / "tree"
    root.mkdir()
    make_tree(root)
    found = scan_tree(str(root), time_limit=30, workers=4)
    assert found.complete and found.errors == 0
    assert found.apparent_bytes == du("-b", str(root))
    assert found.allocated_bytes == du("-B1", str(root))
    assert found.inodes == du("--inodes", str(root))


def test_scan_that_runs_out_of_time_says_so(tmp_path: Path) -> None:
    from watchdogs.fsprobe.scan import scan_tree
    make_tree(tmp_path)
    ticks = iter(range(1000))
    found = scan_tree(str(tmp_path), time_limit=2, workers=1, clock=lambda: float(next(ticks)))
    assert not found.complete
    # A lower bound: find may have written everything before the clock ran out but not yet
    # closed its pipes, and its buffering may hold back all of a small tree's lines.
    assert 0 <= found.inodes <= du("--inodes", str(tmp_path))


def test_directory_quota_is_measured_by_scanning(tmp_path: Path, store: StateStore) -> None:
    data = tmp_path / "project"
    data.mkdir()
    fill(data / "a", 900 * 1024)
    result = run_disk(tmp_path, store, path="project", bytes_limit="1MiB", count="apparent")
    assert result.status is Status.WARNING
    assert "[scan]" in result.summary and "(88 %)" in result.summary


@pytest.mark.timeout(60)
def test_hung_mount_is_unknown_filesystem_not_responding(tmp_path: Path, store: StateStore) -> None:
    reason = fuse_available()
    if reason:
        pytest.skip(reason)
    with hung_mount(tmp_path / "mnt"):
        started = time.monotonic()
        result = run_disk(tmp_path, store, path="mnt", probe_timeout="2s")
        assert time.monotonic() - started < 10
    assert result.status is Status.UNKNOWN
    assert "filesystem not responding" in result.summary


def test_lfs_source_reads_the_quota_tool(tmp_path: Path, store: StateStore,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fixture = Path(__file__).parent.parent / "fixtures" / "quota" / "lfs_quota_u.txt"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "lfs").write_text(f'#!/bin/sh\n[ "$1 $2 $3" = "quota -u alice" ] || exit 9\ncat {fixture}\n')
    (shim / "lfs").chmod(0o700)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    result = run_disk(tmp_path, store, path="/lustre", source="lfs", user="alice")
    assert result.status is Status.CRITICAL  # 4.5 GiB of a 5 GiB soft limit
    assert "bytes 4.5 GiB of 5.0 GiB used (90 %) CRITICAL" in result.summary
    assert "[lfs]" in result.summary


def test_missing_quota_tool_is_unknown_with_the_reason(tmp_path: Path, store: StateStore,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = run_disk(tmp_path, store, path=str(tmp_path), source="mmlsquota", user="alice")
    assert result.status is Status.UNKNOWN
    assert "mmlsquota: command not found" in result.summary
