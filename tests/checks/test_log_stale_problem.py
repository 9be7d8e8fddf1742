"""`log_stale` in heartbeat mode alerts on the set-up problem trainguard writes into its
heartbeat (an unwritable checkpoint folder found at start): the records are written by the
real Guard, read through the check, and the alert flips once and resolves when a fixed run's
heartbeat no longer carries the problem."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.checks.conftest import tick, write_config
from tests.checks.test_log_stale import log_check
from trainguard import Guard, config_from
from watchdogs.alerts.lifecycle import ItemState, Policy, Reading, decide
from watchdogs.result import CheckResult, Status
from watchdogs.state.store import StateStore


def save(folder: Path) -> None:
    (folder / "state").write_text("weights")


@pytest.fixture
def start_training(tmp_path: Path) -> Iterator[Callable[[Path], Guard]]:
    """A real Guard, started and resumed as a training script does; finished at teardown."""
    guards: list[Guard] = []

    def start(checkpoint_dir: Path) -> Guard:
        guard = Guard(config_from({}, checkpoint_dir=checkpoint_dir, heartbeat_dir=tmp_path / "hb",
                                  forced_exit=0, fast_exit=False),
                      save=save, load=lambda path: None)
        guards.append(guard)
        guard.resume()
        return guard

    yield start
    for guard in guards:
        guard.finish()


def flip(state: ItemState, result: CheckResult, now: float) -> tuple[ItemState, str | None]:
    decision = decide(state, Reading(result.status, result.summary, now, result.fingerprint),
                      Policy(), now)
    return decision.state, decision.event


def test_an_unwritable_checkpoint_folder_in_the_heartbeat_is_critical_once_and_resolves(
        tmp_path: Path, store: StateStore, start_training: Callable[[Path], Guard]) -> None:
    (tmp_path / "blocker").write_text("a file where the checkpoint folder's parent should be")
    ckpt = tmp_path / "blocker" / "ckpt"
    start_training(ckpt)
    config = write_config(tmp_path, log_check(heartbeats="hb", max_age="10m"))

    first = tick(config, store)[0]["hung"]
    assert first.status is Status.CRITICAL, first.summary
    assert f"training cannot save: cannot write into the checkpoint folder {ckpt}" in first.summary
    assert "without a checkpoint and without requeue" in first.summary
    assert first.fingerprint == "problem:cannot-save"
    state, event = flip(ItemState("hung"), first, 1.0)
    assert event == "alert"
    again = tick(config, store)[0]["hung"]
    state, event = flip(state, again, 2.0)
    assert event is None, "the same problem on the next tick is not a new alert"

    (tmp_path / "blocker").unlink()         # the user fixes the folder and the job restarts
    start_training(ckpt)
    fixed = tick(config, store)[0]["hung"]
    assert fixed.status is Status.OK and "ranks alive" in fixed.summary, fixed.summary
    assert flip(state, fixed, 3.0)[1] == "resolved"
