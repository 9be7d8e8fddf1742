"""The Guard in this process: real signals, real files, real memory, an injected clock."""
from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.trainguard.guards import Training, run_steps
from tests.trainguard.support import ManualClock
from trainguard import EXIT_NO_PROGRESS, Cause
from trainguard.heartbeat import read_heartbeats
from trainguard.slurm.job import JobEnv


def test_a_real_signal_only_sets_a_flag_and_the_poll_point_saves_and_exits_140(make_guard: Any) -> None:
    clock = ManualClock()
    training = Training(clock)
    guard = make_guard(clock, training).start()
    guard.resume()
    os.kill(os.getpid(), signal.SIGUSR1)
    assert guard.signals.pending and training.saved == []      # the handler did no work
    decision = guard.check(0)
    assert decision is not None and decision.cause is Cause.USER_SIGNAL and decision.action.requeue
    with pytest.raises(SystemExit) as stop:
        guard.act(decision, 0)
    assert stop.value.code == 140
    assert [p.name for p in training.saved] == [".tmp-step-00000000"]


def test_a_second_signal_never_causes_a_second_save(make_guard: Any) -> None:
    clock = ManualClock()
    training = Training(clock)
    guard = make_guard(clock, training).start()
    guard.resume()
    for sig in (signal.SIGUSR1, signal.SIGUSR1, signal.SIGTERM):
        os.kill(os.getpid(), sig)
    with pytest.raises(SystemExit):
        guard.step(0)
    guard.save(0)                                           # asked again by a confused caller
    assert len(training.saved) == 1


def test_finish_restores_the_handlers_that_were_there_before(make_guard: Any) -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
    try:
        guard = make_guard(ManualClock()).start()
        assert signal.getsignal(signal.SIGUSR1) != previous
        guard.finish()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert seen == [signal.SIGUSR1] and not guard.signals.pending
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_files_are_not_polled_before_their_interval(make_guard: Any, tmp_path: Path) -> None:
    clock = ManualClock()
    kill = tmp_path / "KILL"
    guard = make_guard(clock, kill_switch=kill, file_every=5.0).start()
    guard.resume()
    assert guard.check(0) is None                           # first poll: no file yet
    kill.touch()
    step, decision = run_steps(guard, clock, 1, 100, 0.5)
    assert decision is not None and decision.cause is Cause.KILL_SWITCH
    assert step == 10                                       # 5 s after the previous poll
    with pytest.raises(SystemExit) as stop:
        guard.act(decision, step)
    assert stop.value.code == 0


def test_kill_switch_present_at_start_up_exits_0_without_training(make_guard: Any, tmp_path: Path) -> None:
    clock = ManualClock()
    training = Training(clock)
    (tmp_path / "KILL").touch()
    with pytest.raises(SystemExit) as stop:
        make_guard(clock, training, kill_switch=tmp_path / "KILL").start()
    assert stop.value.code == 0 and training.saved == []


def test_the_deadline_keeps_room_for_the_longest_step_the_save_and_the_margin(make_guard: Any) -> None:
    clock = ManualClock()
    guard = make_guard(clock, exit_after=100, save_estimate=5, safety_margin=2).start()
    guard.resume()
    step, decision = run_steps(guard, clock, 0, 1000, 1.0)
    assert decision is not None and decision.cause is Cause.TIME_LIMIT and decision.action.requeue
    # 1 s steps: stop once fewer than 1 + 5 + 2 s are left, i.e. after 92 s (step 91).
    assert step == 91


def test_the_measured_save_time_replaces_the_estimate(make_guard: Any) -> None:
    clock = ManualClock()
    training = Training(clock, save_seconds=20.0)
    guard = make_guard(clock, training, exit_after=200, save_estimate=5, safety_margin=2).start()
    guard.resume()
    run_steps(guard, clock, 0, 10, 1.0)
    guard.save(9)                                           # a periodic save: takes 20 s
    step, decision = run_steps(guard, clock, 10, 1000, 1.0)
    assert decision is not None and decision.cause is Cause.TIME_LIMIT
    assert step == 9 + (200 - 30 - (1 + 20 + 2))            # stop 23 s before the end


def test_a_long_step_is_forgotten_after_two_windows(make_guard: Any) -> None:
    clock = ManualClock()
    guard = make_guard(clock, step_window=10).start()
    guard.resume()
    clock.advance(8.0)
    guard.check(0)
    assert guard.steps.recent_max == 8.0
    run_steps(guard, clock, 1, 40, 0.5)
    assert guard.steps.recent_max == 0.5


def test_the_save_switch_saves_removes_the_file_and_continues(make_guard: Any, tmp_path: Path) -> None:
    clock = ManualClock()
    training = Training(clock)
    switch = tmp_path / "SAVE"
    guard = make_guard(clock, training, save_switch=switch, file_every=1.0).start()
    guard.resume()
    switch.touch()
    for round_ in (1, 2):
        step, decision = run_steps(guard, clock, 10 * round_, 10 * round_ + 10, 0.6)
        assert decision is not None and decision.cause is Cause.SAVE_SWITCH
        guard.act(decision, step)                           # returns: training continues
        assert not switch.exists() and len(training.saved) == round_
        assert run_steps(guard, clock, step + 1, step + 6, 0.6)[1] is None
        switch.touch()


def test_the_memory_watchdog_sees_a_real_allocation(make_guard: Any) -> None:
    clock = ManualClock()
    rss = psutil.Process().memory_info().rss
    guard = make_guard(clock, max_rss=rss + 64 * 2**20, memory_every=2.0).start()
    guard.resume()
    assert run_steps(guard, clock, 0, 5, 1.0)[1] is None
    ballast = bytearray(b"\1") * (160 * 2**20)             # written, so resident
    step, decision = run_steps(guard, clock, 5, 20, 1.0)
    assert len(ballast) and decision is not None and decision.cause is Cause.MEMORY
    assert decision.action.requeue and "max_rss" in guard.sensors.memory_reason


def test_heartbeats_are_rate_limited_but_phase_changes_are_written_at_once(make_guard: Any,
                                                                          tmp_path: Path) -> None:
    clock = ManualClock()
    beats = tmp_path / "hb"
    guard = make_guard(clock, heartbeat_dir=beats, heartbeat_every=30.0).start()
    guard.resume()
    run_steps(guard, clock, 0, 20, 1.0)                     # 20 s: nothing new since resume()
    assert read_heartbeats(beats)[0].step == -1
    run_steps(guard, clock, 20, 35, 1.0)
    assert read_heartbeats(beats)[0].step in range(28, 35)
    with guard.phase("eval"):
        assert read_heartbeats(beats)[0].phase == "eval"
    assert read_heartbeats(beats)[0].phase == "train"


def test_an_exception_saves_the_last_step_and_exits_1(make_guard: Any) -> None:
    clock = ManualClock()
    training = Training(clock)
    guard = make_guard(clock, training)
    with pytest.raises(SystemExit) as stop, guard:
        guard.resume()
        run_steps(guard, clock, 0, 5, 0.1)
        raise RuntimeError("boom")
    assert stop.value.code == 1
    assert guard.checkpoints is not None and guard.checkpoints.latest().step == 4


def test_restarts_without_progress_stop_requeuing(make_guard: Any) -> None:
    job = JobEnv(job_id="77", restart_count=1)
    for attempt in range(3):                                # first start + 2 restarts: allowed
        guard = make_guard(ManualClock(), job=job, max_restarts_without_progress=3).start()
        assert guard.resume() == 0, attempt
        guard.finish()
    guard = make_guard(ManualClock(), job=job, max_restarts_without_progress=3).start()
    with pytest.raises(SystemExit) as stop:
        guard.resume()
    assert stop.value.code == EXIT_NO_PROGRESS
    other_chain = make_guard(ManualClock(), job=JobEnv(job_id="78")).start()
    assert other_chain.resume() == 0
