"""The lock files are opened without following links (O_NOFOLLOW): a symlink planted in the
state folder under a lock's name is refused, and nothing is created or written where it points."""
from __future__ import annotations

from pathlib import Path

import pytest

from watchdogs.errors import WatchdogsError
from watchdogs.scheduler.lock import LOCK_NAME, Lock
from watchdogs.state import locking


def test_a_scheduler_lock_planted_as_a_symlink_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    target = tmp_path / "precious"
    target.write_text("precious\n")
    (state / LOCK_NAME).symlink_to(target)
    with pytest.raises(WatchdogsError, match="a symbolic link where the lock file belongs, refused"):
        Lock(state).acquire("test")
    assert target.read_text() == "precious\n"


def test_the_lock_probe_never_creates_a_file_where_a_planted_symlink_points(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    target = tmp_path / "made-through-the-link"
    (state / ".lock-probe").symlink_to(target)
    locking.probe(state)
    assert not target.exists()
