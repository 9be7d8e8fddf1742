"""trainguard's own bad input: switch files that are not plain files, and a checkpoint folder
that takes no files. Real files, symlinks and a real read-only filesystem (tmpfs)."""
from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import tmpfs
from tests.trainguard.guards import Training, run_steps
from tests.trainguard.support import ManualClock
from trainguard import EXIT_CANNOT_SAVE, Cause
from trainguard.heartbeat import read_heartbeats


def test_a_save_switch_that_is_a_directory_is_ignored_with_a_warning_and_training_goes_on(
        make_guard: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    training = Training(clock)
    switch = tmp_path / "SAVE"
    switch.mkdir()
    guard = make_guard(clock, training, save_switch=switch, file_every=1.0).start()
    guard.resume()
    with caplog.at_level(logging.WARNING, "trainguard"):
        for step in range(20):
            clock.advance(0.6)
            assert guard.step(step) is None, step           # no decision, no IsADirectoryError
    assert switch.is_dir() and training.saved == []
    warnings = [r.getMessage() for r in caplog.records if "is a directory" in r.getMessage()]
    assert len(warnings) == 1 and str(switch) in warnings[0]   # said once, not at every poll
    switch.rmdir()
    switch.touch()                                           # a real switch still works
    step, decision = run_steps(guard, clock, 20, 30, 0.6)
    assert decision is not None and decision.cause is Cause.SAVE_SWITCH


def _dangling(path: Path) -> None:
    path.symlink_to(path.with_name("nowhere"))


def _loop(path: Path) -> None:
    other = path.with_name("loop-other")
    path.symlink_to(other)
    other.symlink_to(path)


@pytest.mark.parametrize("make_link, words", [(_dangling, "a dangling symlink"), (_loop, "a symlink loop")])
def test_a_kill_switch_that_is_a_broken_symlink_is_thrown_and_the_log_says_so(
        make_guard: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, make_link: Any,
        words: str) -> None:
    clock = ManualClock()
    kill = tmp_path / "KILL"
    guard = make_guard(clock, kill_switch=kill, file_every=1.0).start()
    guard.resume()
    assert run_steps(guard, clock, 0, 5, 0.6)[1] is None
    make_link(kill)
    with caplog.at_level(logging.WARNING, "trainguard"):
        step, decision = run_steps(guard, clock, 5, 20, 0.6)
    assert decision is not None and decision.cause is Cause.KILL_SWITCH
    assert any(f"kill switch {kill} is {words}" in r.getMessage() for r in caplog.records)
    with pytest.raises(SystemExit) as stop:
        guard.act(decision, step)
    assert stop.value.code == 0
    assert kill.is_symlink()                                 # never removed by the guard


def test_a_dangling_kill_switch_at_start_up_means_no_training(make_guard: Any, tmp_path: Path) -> None:
    kill = tmp_path / "KILL"
    _dangling(kill)
    with pytest.raises(SystemExit) as stop:
        make_guard(ManualClock(), kill_switch=kill).start()
    assert stop.value.code == 0


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A real read-only filesystem: nobody, the owner included, can write into it."""
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as mount:
        yield mount


@pytest.fixture(params=["read-only filesystem", "a file in the way"])
def unwritable(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "a file in the way":
        (tmp_path / "blocker").write_text("not a folder")
        return tmp_path / "blocker" / "ckpt"
    return request.getfixturevalue("read_only_dir") / "ckpt"


def test_an_unwritable_checkpoint_folder_is_found_at_start_and_written_into_the_heartbeat(
        make_guard: Any, tmp_path: Path, unwritable: Path, caplog: pytest.LogCaptureFixture) -> None:
    beats = tmp_path / "hb"
    guard = make_guard(ManualClock(), checkpoint_dir=unwritable, heartbeat_dir=beats).start()
    with caplog.at_level(logging.WARNING, "trainguard"):
        assert guard.resume() == 0                           # it trains anyway
    message = f"cannot write into the checkpoint folder {unwritable}"
    assert any(message in r.getMessage() for r in caplog.records), caplog.text
    [beat] = read_heartbeats(beats)
    assert beat.problem.startswith(message)


def test_a_stop_request_with_no_way_to_save_exits_without_requeue_and_says_why(
        make_guard: Any, tmp_path: Path, unwritable: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    training = Training(clock)
    guard = make_guard(clock, training, checkpoint_dir=unwritable).start()
    guard.resume()
    run_steps(guard, clock, 0, 5, 0.1)
    os.kill(os.getpid(), signal.SIGUSR1)                     # scancel --signal=USR1: would requeue
    with caplog.at_level(logging.ERROR, "trainguard"), pytest.raises(SystemExit) as stop:
        guard.step(5)
    assert stop.value.code == EXIT_CANNOT_SAVE and training.saved == []
    [error] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "no checkpoint can be written" in error and "no requeue" in error and str(unwritable) in error


def test_the_save_switch_with_no_way_to_save_continues_training(make_guard: Any, tmp_path: Path,
                                                                 unwritable: Path) -> None:
    clock = ManualClock()
    switch = tmp_path / "SAVE"
    guard = make_guard(clock, checkpoint_dir=unwritable, save_switch=switch, file_every=1.0).start()
    guard.resume()
    switch.touch()
    step, decision = run_steps(guard, clock, 0, 10, 0.6)
    assert decision is not None and decision.cause is Cause.SAVE_SWITCH
    guard.act(decision, step)                                # returns: no exit, no traceback
    assert not switch.exists()                               # acknowledged, so not retried forever
