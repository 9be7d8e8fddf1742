"""Training health inside the training: the loss read on the slow path only, NaN stops
without saving (exit 5) or rolls back (exit 140, nothing saved), a starving data loader,
a throughput drop against the run's own baseline, a loss spike, and the policy settings.
Real trainings (slurm/train_tiny.py) as processes; the judgements with an injected clock."""
from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from tests.trainguard.support import PYTHON, TRAIN_TINY, ManualClock, train_env
from trainguard import Guard, config_from
from trainguard.causes import EXIT_NAN_LOSS, EXIT_REQUEUE, ROLLBACK, Cause
from trainguard.checkpoints.checkpoint import Checkpoints
from trainguard.heartbeat import read_heartbeats
from trainguard.slurm.job import JobEnv


class CountingLoss:
    """A loss whose reads are counted: what a CUDA tensor's `float()` (a device sync) costs."""

    def __init__(self, value: float) -> None:
        self.value, self.reads = value, 0

    def __float__(self) -> float:
        self.reads += 1
        return self.value


def health_guard(tmp_path: Path, clock: ManualClock, **settings: object) -> Guard:
    config = config_from({}, heartbeat_dir=tmp_path / "hb", forced_exit=0, hang_detect=False,
                         **settings)
    guard = Guard(config, job=JobEnv(), clock=clock)
    guard.resume()
    return guard


def run_tiny(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, str(TRAIN_TINY), "--guard", f"checkpoint_dir={tmp_path / 'ckpt'}",
                           "--guard", f"heartbeat_dir={tmp_path / 'hb'}", *args],
                          capture_output=True, text=True, timeout=timeout, env=train_env(**(env or {})))


def test_the_loss_is_read_only_on_the_slow_path_not_per_step(tmp_path: Path) -> None:
    clock = ManualClock()
    guard = health_guard(tmp_path, clock)
    loss = CountingLoss(2.5)
    for step in range(1000):            # no time passes: after the first poll, the hot path only
        guard.observe(loss=loss, samples=8)
        guard.step(step)
    assert loss.reads == 1              # the first step after resume() polls everything
    clock.advance(1.5)                  # the slow path (at most every second) reads it once
    guard.step(1000)
    assert loss.reads == 2
    assert guard.health is not None and guard.health.record.loss == 2.5
    assert guard.health.samples == 8000


def test_a_nan_loss_stops_the_training_without_saving_and_exits_5(tmp_path: Path) -> None:
    done = run_tiny(tmp_path, "--steps", "300", "--lr-jump-step", "50", "--save-every", "10",
                    "--step-sleep", "0.01")
    assert done.returncode == EXIT_NAN_LOSS, done.stderr[-3000:]
    found = re.search(r"trainguard: loss nan at step (\d+) \(last finite [\d.]+ at step (\d+)\)", done.stderr)
    assert found, done.stderr[-3000:]
    nan_step, finite_step = int(found.group(1)), int(found.group(2))
    assert finite_step < nan_step and 50 <= nan_step < 150
    assert f"stopping after step {nan_step}: nan_loss -> exit 5 (no checkpoint saved: not requeued)" \
        in done.stderr
    # Nothing saved once the loss was NaN: the newest checkpoint is from before the jump.
    newest = Checkpoints(tmp_path / "ckpt").complete()[0]
    assert newest.step < 51, newest
    [beat] = read_heartbeats(tmp_path / "hb")
    assert beat.health is not None and beat.health.nan_step == nan_step
    assert beat.health.checkpoint_step == newest.step
    assert beat.health.action == f"stopped after step {nan_step:,}, not requeued (exit 5)"


def test_the_rollback_policy_exits_140_without_saving_so_the_last_good_checkpoint_resumes(
        tmp_path: Path) -> None:
    done = run_tiny(tmp_path, "--steps", "300", "--lr-jump-step", "50", "--save-every", "10",
                    "--step-sleep", "0.01", env={"TRAINGUARD_POLICY_NAN_LOSS": "rollback"})
    assert done.returncode == EXIT_REQUEUE, done.stderr[-3000:]
    assert "nan_loss -> exit 140 (no checkpoint saved: requeue, resuming from the last checkpoint" \
        in done.stderr
    assert Checkpoints(tmp_path / "ckpt").complete()[0].step < 51
    [beat] = read_heartbeats(tmp_path / "hb")
    assert beat.health is not None and beat.health.action.startswith("rolled back: exit 140 without saving")


def test_a_data_loader_that_sleeps_is_named_and_a_fast_one_is_not(tmp_path: Path) -> None:
    window = ("--guard", "health_window=1s", "--guard", "health_warmup=0", "--guard", "heartbeat_every=1s")
    slow = run_tiny(tmp_path / "slow", "--steps", "120", "--data-sleep", "0.03", *window)
    assert slow.returncode == 0, slow.stderr[-3000:]
    found = re.search(r"trainguard: data loader: (\d+)% of the training time spent waiting", slow.stderr)
    assert found and int(found.group(1)) >= 50, slow.stderr[-3000:]
    fast = run_tiny(tmp_path / "fast", "--steps", "120", "--step-sleep", "0.03", *window)
    assert fast.returncode == 0 and "data loader:" not in fast.stderr, fast.stderr[-3000:]
    [beat] = read_heartbeats(tmp_path / "fast" / "hb")
    assert beat.health is not None and beat.health.data_share < 0.2


def test_throughput_below_the_runs_own_baseline_after_warm_up_is_a_finding(tmp_path: Path) -> None:
    clock = ManualClock()
    guard = health_guard(tmp_path, clock, health_window=10, health_warmup=30, baseline_windows=2,
                         throughput_windows=2)
    assert guard.health is not None
    step = 0

    def train(seconds: float, per_second: int) -> None:
        nonlocal step
        for _ in range(int(seconds * 10)):
            clock.advance(0.1)
            for _ in range(per_second // 10):
                guard.observe(loss=1.0, samples=32)
                guard.step(step)
                step += 1
    train(60, 100)          # warm-up and baseline: 100 steps/s = 3200 samples/s
    assert guard.health.record.baseline == pytest.approx(3200, rel=0.05)
    assert Cause.THROUGHPUT not in guard.health.found
    train(30, 50)           # half the throughput for three windows
    finding = guard.health.found[Cause.THROUGHPUT]
    assert re.fullmatch(r"throughput 5\d% of this run's baseline \(1\d{3} vs 3\d{3} samples/s\) "
                        r"for \d windows", finding.text), finding.text
    train(30, 100)          # back to normal: the finding ends
    assert Cause.THROUGHPUT not in guard.health.found


def test_a_loss_that_jumps_far_above_its_trend_for_three_readings_is_a_spike(tmp_path: Path) -> None:
    clock = ManualClock()
    guard = health_guard(tmp_path, clock)
    assert guard.health is not None
    for step in range(40):                       # one reading per second, a gently noisy trend
        guard.observe(loss=2.0 + 0.01 * math.sin(step))
        clock.advance(1.1)
        guard.step(step)
    for step in range(40, 43):
        guard.observe(loss=9.0)
        clock.advance(1.1)
        guard.step(step)
    spike = guard.health.found[Cause.LOSS_SPIKE]
    assert spike.text.startswith("loss spike: 9 at step 42 vs its trend 2 ± "), spike.text
    assert "(3 readings in a row above, since step 40)" in spike.text


def test_policy_entries_come_from_the_environment_and_a_bad_name_is_a_clear_error() -> None:
    config = config_from({"TRAINGUARD_POLICY_NAN_LOSS": "rollback", "TRAINGUARD_POLICY_STRAGGLER": "warn"})
    assert config.policy.action(Cause.NAN_LOSS) == ROLLBACK
    with pytest.raises(ValueError, match=r"TRAINGUARD_POLICY_\*: policy for 'nan_loss' = 'explode': "
                                         r"expected one of save_and_requeue"):
        config_from({"TRAINGUARD_POLICY_NAN_LOSS": "explode"})
    with pytest.raises(ValueError, match="policy key 'nan_los'"):
        config_from({"TRAINGUARD_POLICY_NAN_LOS": "warn"})


def test_the_heartbeat_carries_the_health_record_as_json(tmp_path: Path) -> None:
    clock = ManualClock()
    guard = health_guard(tmp_path, clock, heartbeat_every=1)
    guard.observe(loss=1.25, samples=4)
    clock.advance(2)
    guard.step(0)
    data = json.loads((tmp_path / "hb" / "rank-0.json").read_text())
    assert data["health"]["loss"] == 1.25 and data["health"]["findings"] == []
    assert data["health"]["accelerator"].startswith("off: ")   # no GPU here, and it says so


def test_the_idle_accelerator_check_is_off_here_and_says_why() -> None:
    """No GPU on this machine and none faked: only the 'off' paths are tested."""
    from trainguard.health.accel import Accelerator

    assert Accelerator.open({}) == (None, "off: the job holds no GPU (CUDA_VISIBLE_DEVICES and "
                                          "SLURM_JOB_GPUS unset)")
    accel, why = Accelerator.open({"CUDA_VISIBLE_DEVICES": "0"})
    assert accel is None
    assert why == "off: NVML not installed (pip install 'trainguard[nvml]')" or why.startswith("off: NVML: ")
