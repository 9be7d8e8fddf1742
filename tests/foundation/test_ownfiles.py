"""watchdogs.ownfiles: what the watchdog creates gets its mode whatever the umask, and is
never created through a link someone planted."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from watchdogs import ownfiles


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("umask", [0o002, 0o000, 0o077])
def test_every_missing_level_gets_the_mode_and_an_existing_folder_is_left_alone(
        tmp_path: Path, umask: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)
    old = os.umask(umask)
    try:
        made = ownfiles.make_dirs(shared / "a" / "b" / "c")
    finally:
        os.umask(old)
    assert made == shared / "a" / "b" / "c"
    assert [mode(p) for p in (shared / "a", shared / "a" / "b", made)] == [0o700] * 3
    assert mode(shared) == 0o2775


def test_a_folder_path_that_is_a_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError):
        ownfiles.make_dirs(tmp_path / "f")


def test_a_private_file_is_never_created_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("mine")
    (tmp_path / "log").symlink_to(victim)
    for append in (False, True):
        with pytest.raises(OSError):
            ownfiles.create_private(tmp_path / "log", append=append)
    assert victim.read_text() == "mine"
    old = os.umask(0o002)
    try:
        os.close(ownfiles.create_private(tmp_path / "new.log"))
    finally:
        os.umask(old)
    assert mode(tmp_path / "new.log") == 0o600


def test_an_atomic_write_replaces_a_link_at_the_target_and_never_writes_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("mine")
    victim.chmod(0o600)
    target = tmp_path / "watchdogs.prom"
    target.symlink_to(victim)
    for pid in range(os.getpid(), os.getpid() + 5):   # the old predictable temporary names
        (tmp_path / f".watchdogs.prom.{pid}.tmp").symlink_to(victim)
    ownfiles.write_atomic(target, b"metrics\n", 0o644)
    assert victim.read_text() == "mine" and mode(victim) == 0o600
    assert not target.is_symlink() and target.read_bytes() == b"metrics\n" and mode(target) == 0o644
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".watchdogs.prom.") and
                 not p.is_symlink()]
    assert leftovers == []
