"""The hang budget and its decisions, with the clock in the test's hand: learned from the
step times (multiple x percentile, floor, ceiling), per phase, bounded by EndTime; the
rank that stopped first; the hang count across restarts; bad settings named."""
from __future__ import annotations

import math

import pytest

from trainguard.config import config_from
from trainguard.hangs.record import chain_ends, describe, first_to_stop, next_count
from trainguard.hangs.watch import HangLimits, HangWatch, Stall, StepBudget, allowed
from trainguard.heartbeat import Heartbeat

LIMITS = HangLimits(floor=2.0, ceiling=60.0, multiple=10.0, percentile=99.0, first_step=30.0,
                    phases={"saving": 600.0, "eval": 900.0})


class Loop:
    """What the guard's poll point records: the last step and when it completed."""

    def __init__(self) -> None:
        self.step, self.tick = -1, 0.0

    def run(self, steps: int, seconds_each: float) -> None:
        self.step += steps
        self.tick += steps * seconds_each


def watch(loop: Loop, deadline: float = math.inf) -> tuple[HangWatch, list[Stall]]:
    stalls: list[Stall] = []

    def on_hang(stall: Stall) -> bool:
        stalls.append(stall)
        return False
    hw = HangWatch(LIMITS, lambda: (loop.step, loop.tick), lambda: deadline, on_hang,
                   clock=lambda: loop.tick, threaded=False)
    hw.phase_changed("train", 0.0)    # as after resume(), without starting the thread
    return hw, stalls


def test_the_budget_is_a_multiple_of_the_step_times_percentile_within_floor_and_ceiling() -> None:
    budget = StepBudget(LIMITS)
    assert budget.budget == 30.0                 # no step time yet: hang_first_step
    for i in range(200):
        budget.observe(i * 10, i * 10 * 0.5)     # 10 steps of 0.5 s between looks
    assert budget.base == pytest.approx(0.5) and budget.budget == pytest.approx(5.0)
    fast = StepBudget(LIMITS)
    for i in range(50):
        fast.observe(i * 100, i * 100 * 0.001)
    assert fast.budget == 2.0                    # the floor
    slow = StepBudget(LIMITS)
    for i in range(50):
        slow.observe(i, i * 20.0)
    assert slow.budget == 60.0                   # the ceiling


def test_a_stall_past_the_budget_is_reported_once_and_a_phase_has_its_own_budget() -> None:
    loop = Loop()
    hw, _ = watch(loop)
    for _ in range(20):
        loop.run(10, 0.1)
        assert hw.look(loop.tick) is None
    assert hw.budget.budget == pytest.approx(2.0)   # 10 x 0.1 s is below the floor
    assert hw.look(loop.tick + 1.9) is None
    stall = hw.look(loop.tick + 2.1)
    assert stall is not None and stall.phase == "train" and stall.step == loop.step
    assert stall.budget == pytest.approx(2.0)
    assert hw.look(loop.tick + 5.0) is None         # the same stall: once
    hw.phase_changed("saving", loop.tick)
    assert hw.look(loop.tick + 599) is None          # a long save is no hang
    saving = hw.look(loop.tick + 601)
    assert saving is not None and saving.phase == "saving" and saving.budget == 600.0
    hw.phase_changed("stopping", loop.tick)
    assert hw.look(loop.tick + 10_000) is None       # stopping is the forced exit's business


def test_the_budget_is_bounded_by_the_time_left_to_endtime() -> None:
    assert allowed(60.0, since=100.0, deadline=math.inf, reserve=10.0, base=0.5) == 60.0
    assert allowed(60.0, since=100.0, deadline=130.0, reserve=10.0, base=0.5) == 20.0
    # Close to the end: never less than twice the usual step.
    assert allowed(60.0, since=100.0, deadline=105.0, reserve=10.0, base=0.5) == 1.0
    loop = Loop()
    hw, _ = watch(loop, deadline=50.0)
    for _ in range(5):
        loop.run(10, 0.1)
        hw.look(loop.tick)
    hw.budget = StepBudget(HangLimits(floor=30.0, ceiling=60.0))
    stall = hw.look(loop.tick + 36)
    assert stall is not None and stall.budget == pytest.approx(50.0 - 10.0 - loop.tick)


def test_the_first_to_stop_is_the_lowest_step_then_the_rank_that_could_not_say_hung() -> None:
    def beat(rank: int, step: int, phase: str, t: float) -> Heartbeat:
        return Heartbeat(rank, step, phase, t, host=f"node{rank}")
    beats = [beat(0, 100, "hung", 50.0), beat(1, 100, "train", 40.0), beat(2, 100, "hung", 51.0),
             beat(3, 120, "done", 10.0)]
    first = first_to_stop(beats)
    assert first is not None and first.rank == 1
    assert first_to_stop([beat(0, 100, "hung", 50.0), beat(1, 99, "hung", 52.0)]).rank == 1  # type: ignore[union-attr]  # why: None fails the test too


AGES = [(2.46, "2.5 s"), (400, "6 min 40 s"), (2 * 3600 + 300, "2 h 05 min"),
        (3 * 86400 + 4 * 3600, "3 d 04 h")]


@pytest.mark.parametrize(("ago", "said"), AGES)
def test_a_rank_s_last_heartbeat_is_said_in_minutes_and_hours_not_raw_seconds(ago: float, said: str) -> None:
    beat = Heartbeat(3, 41199, "train", 1000.0, host="node7")
    assert describe(beat, 1000.0 + ago).endswith(f"train, last heartbeat {said} ago")


def test_hangs_count_once_per_run_and_reset_with_a_new_checkpoint() -> None:
    count = next_count(None, "88", 1000, 0)
    count = next_count(count, "88", 1000, 0)         # a second rank of the same run
    assert count.hangs == 1 and not chain_ends(count, 2)
    count = next_count(count, "88", 1000, 1)
    assert count.hangs == 2 and chain_ends(count, 2)
    assert next_count(count, "88", 1100, 2).hangs == 1   # progress: a new checkpoint
    assert next_count(count, "99", 1000, 0).hangs == 1   # a new chain


@pytest.mark.parametrize(("setting", "value", "expected"), [
    ("hang_floor", "0", "expected 0 < floor <= ceiling"),
    ("hang_multiple", "0.5", "hang_multiple = 0.5: expected a number >= 1"),
    ("hang_percentile", "x", "hang_percentile = 'x': expected a number"),
    ("hang_eval", "0", "hang_eval = 0.0: expected a duration > 0"),
])
def test_bad_hang_settings_are_named(setting: str, value: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        config_from(env={}, **{setting: value})
