"""The scan fallback (GNU find, streamed and summed) against GNU du on real trees: every
worker count, a mount point inside the tree, hard links across walkers, and a real hung
FUSE mount inside the tree and as the root."""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checks.hung_mount import fuse_available, hung_mount
from tests.checks.test_disk import du, make_tree, run_disk
from tests.helpers import tmpfs
from watchdogs.fsprobe.scan import scan_tree
from watchdogs.result import Status
from watchdogs.state.store import StateStore


def wide_tree(root: Path) -> None:
    """Enough top folders (and one deep chain) for several walkers, with files hard-linked
    across folders that different walkers get, and files at the top level."""
    make_tree(root)
    for top in range(9):
        deep = root / f"top{top}" / "a" / "b"
        deep.mkdir(parents=True)
        for f in range(7):
            (deep / f"g{f}").write_bytes(b"y" * (top * 1000 + f))
    os.link(root / "top0" / "a" / "b" / "g1", root / "top8" / "a" / "linked-g1")
    os.link(root / "top0" / "a" / "b" / "g1", root / "linked-at-top")
    (root / "top-level-file").write_bytes(b"z" * 12345)


def du_counts(root: Path, *extra: str) -> tuple[int, int, int]:
    return (du(*extra, "-b", str(root)), du(*extra, "-B1", str(root)),
            du(*extra, "--inodes", str(root)))


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_every_worker_count_gives_du_s_bytes_blocks_and_inodes(tmp_path: Path, workers: int) -> None:
    wide_tree(tmp_path)
    found = scan_tree(str(tmp_path), time_limit=30, workers=workers)
    assert found.complete and found.errors == 0
    assert (found.apparent_bytes, found.allocated_bytes, found.inodes) == du_counts(tmp_path)


def test_a_tree_of_one_folder_is_shared_out_below_it(tmp_path: Path) -> None:
    """The walkers get folders one level further down when the top has only one."""
    wide_tree(tmp_path / "only")
    found = scan_tree(str(tmp_path), time_limit=30, workers=4)
    assert (found.apparent_bytes, found.allocated_bytes, found.inodes) == du_counts(tmp_path)


def test_a_file_or_a_symlink_as_root_counts_itself(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"q" * 5000)
    (tmp_path / "link").symlink_to(tmp_path)
    for name in ("file", "link"):
        found = scan_tree(str(tmp_path / name), time_limit=30, workers=2)
        assert (found.apparent_bytes, found.allocated_bytes, found.inodes) == du_counts(tmp_path / name)


def test_relative_root_and_names_like_find_operators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting points are passed as absolute paths: a folder named `!` or `-name` is a folder."""
    for name in ("!", "-name", "(", "-delete"):
        (tmp_path / "t" / name).mkdir(parents=True)
        (tmp_path / "t" / name / "f").write_bytes(b"1" * 100)
    monkeypatch.chdir(tmp_path)
    for workers in (1, 2):
        found = scan_tree("t", time_limit=30, workers=workers)
        assert (found.apparent_bytes, found.inodes) == (du("-b", "t"), du("--inodes", "t"))
    assert all((tmp_path / "t" / name / "f").exists() for name in ("!", "-name", "(", "-delete"))


@pytest.fixture
def tree_with_mount(tmp_path: Path) -> Iterator[Path]:
    """A tree with a real tmpfs mounted two levels down and one at the top, both filled."""
    wide_tree(tmp_path / "tree")
    points = [tmp_path / "tree" / "top3" / "a" / "mnt", tmp_path / "tree" / "mnt-top"]
    with contextlib.ExitStack() as mounts:
        for point in points:
            mounts.enter_context(tmpfs(point, "4m"))
            (point / "inside").write_bytes(b"m" * 200_000)
        yield tmp_path / "tree"


@pytest.mark.parametrize("workers", [1, 2])
def test_mount_points_inside_the_tree_are_not_entered(tree_with_mount: Path, workers: int) -> None:
    found = scan_tree(str(tree_with_mount), time_limit=30, workers=workers)
    assert (found.apparent_bytes, found.allocated_bytes, found.inodes) == du_counts(tree_with_mount, "-x")
    assert found.inodes < du("--inodes", str(tree_with_mount))  # du without -x does cross


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [1, 2])
def test_hung_mount_inside_the_tree_stops_the_scan_at_its_time_limit(tmp_path: Path, workers: int) -> None:
    reason = fuse_available()
    if reason:
        pytest.skip(reason)
    wide_tree(tmp_path / "tree")
    with hung_mount(tmp_path / "tree" / "top4" / "dead"):
        started = time.monotonic()
        found = scan_tree(str(tmp_path / "tree"), time_limit=2, workers=workers)
        assert time.monotonic() - started < 5
    assert not found.complete
    assert found.inodes < du("--inodes", str(tmp_path / "tree"))  # a lower bound
    if workers > 1:
        assert found.inodes > 0  # the top levels, counted here; find's output is buffered


@pytest.mark.timeout(60)
def test_directory_quota_over_a_hung_mount_is_unknown_not_a_hang(tmp_path: Path, store: StateStore) -> None:
    reason = fuse_available()
    if reason:
        pytest.skip(reason)
    with hung_mount(tmp_path / "mnt"):
        started = time.monotonic()
        result = run_disk(tmp_path, store, path="mnt", bytes_limit="1MiB", probe_timeout="2s",
                          scan_timeout="2s")
        assert time.monotonic() - started < 10
    assert result.status is Status.UNKNOWN
    assert "filesystem not responding" in result.summary


def test_without_gnu_find_the_check_is_unknown_and_says_why(tmp_path: Path, store: StateStore,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "project" / "sub" / "deeper" / "still").mkdir(parents=True)
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    result = run_disk(tmp_path, store, path="project", bytes_limit="1MiB")
    assert result.status is Status.UNKNOWN
    assert "GNU find is needed for the scan" in result.summary
