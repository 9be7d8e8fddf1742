"""A chain instance starting while the state is held waits for a home's run (which watches
meanwhile) and for a command's moment, never for another scheduler: the holder's note, as
the real home and command write it, says which."""
from __future__ import annotations

from pathlib import Path

from watchdogs.scheduler import home
from watchdogs.scheduler.lock import COMMAND_WAIT_S, HOME_WAIT_S, Lock, wait_for_holder


def test_a_home_runs_hold_is_waited_out_a_commands_briefly_and_another_schedulers_not_at_all(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    turn = home.take_turn(state, state / "STOP", "scrontab", None)
    assert turn.skipped is None and turn.fd is not None
    try:
        holder = Lock(state).acquire("job 42")  # a second open file description: held, not ours
        assert holder is not None and "run --once --home scrontab" in holder, holder
        assert wait_for_holder(holder) == HOME_WAIT_S
    finally:
        turn.release()
    assert wait_for_holder(held_by(state, "command silence (pid 1 on login1)")) == COMMAND_WAIT_S
    assert wait_for_holder(held_by(state, "job 41")) == 0.0


def held_by(state: Path, who: str) -> str:
    """The holder's note a starting scheduler reads while `who` holds the lock."""
    lock = Lock(state)
    assert lock.acquire(who) is None
    try:
        held = Lock(state).acquire("job 42")
        assert held is not None and held.startswith(who), held
        return held
    finally:
        lock.release()
