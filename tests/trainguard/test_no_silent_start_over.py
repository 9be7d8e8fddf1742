"""Never start over silently: real truncated checkpoint files under the real example
training (slurm/train_tiny.py), as a process. A resume that passes over a damaged
checkpoint says so in the log and the heartbeat, with the steps lost; when every
checkpoint is damaged the training stops with a CheckpointError and a non-zero exit, and
leaves the damaged folders as they are; a fresh start needs `start_over`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainguard.support import run_tiny
from trainguard.checkpoints.checkpoint import Checkpoints, step_name


def _truncate(folder: Path) -> None:
    state = folder / "state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])


def _train(tmp_path: Path, steps: int, *extra: str):
    return run_tiny("--steps", str(steps), "--save-every", "10",
                    "--guard", f"checkpoint_dir={tmp_path / 'ckpt'}",
                    "--guard", f"heartbeat_dir={tmp_path / 'hb'}", *extra)


def _first_run(tmp_path: Path) -> Path:
    first = _train(tmp_path, 30)
    assert first.returncode == 0, first.stderr[-2000:]
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.glob("step-*")) == [step_name(19), step_name(29)]
    return ckpt


@pytest.mark.timeout(180)
def test_a_truncated_newest_checkpoint_is_said_in_the_log_and_the_heartbeat_with_the_steps_lost(
        tmp_path: Path) -> None:
    ckpt = _first_run(tmp_path)
    _truncate(ckpt / step_name(29))
    second = _train(tmp_path, 40)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "resumed from step 19, not the newest checkpoint" in second.stderr
    assert "state.pt truncated" in second.stderr and "10 step(s) lost" in second.stderr
    beat = json.loads((tmp_path / "hb" / "rank-0.json").read_text())
    assert "10 step(s) lost" in beat["problem"]
    # The damaged folder is kept for a post-mortem, under a name no save overwrites.
    assert (ckpt / f"damaged-{step_name(29)}" / "state.pt").exists()
    assert "final step 39" in second.stdout


@pytest.mark.timeout(180)
def test_every_checkpoint_truncated_stops_with_a_checkpoint_error_and_keeps_them(tmp_path: Path) -> None:
    ckpt = _first_run(tmp_path)
    for folder in ckpt.glob("step-*"):
        _truncate(folder)
    before = {p.name: p.stat().st_size for p in ckpt.glob("step-*/state.pt")}
    second = _train(tmp_path, 40)
    assert second.returncode != 0 and second.returncode != 140     # no requeue either
    assert "CheckpointError" in second.stderr and "refusing to start over silently" in second.stderr
    assert "start_over" in second.stderr                           # the way out is named
    assert "final step" not in second.stdout                       # not a single step trained
    assert {p.name: p.stat().st_size for p in ckpt.glob("step-*/state.pt")} == before


@pytest.mark.timeout(180)
def test_a_fresh_start_over_damaged_checkpoints_needs_the_flag_and_keeps_them_aside(
        tmp_path: Path) -> None:
    ckpt = _first_run(tmp_path)
    for folder in ckpt.glob("step-*"):
        _truncate(folder)
    third = _train(tmp_path, 30, "--guard", "start_over=1")
    assert third.returncode == 0, third.stderr[-2000:]
    assert "started over from step 0 (start_over)" in third.stderr
    assert "30 step(s) lost" in third.stderr
    assert sorted(p.name for p in ckpt.glob("damaged-step-*")) == [
        f"damaged-{step_name(19)}", f"damaged-{step_name(29)}"]
    assert Checkpoints(ckpt).latest() is not None


def test_a_checkpoint_without_its_marker_counts_as_damaged_not_as_absent(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path)
    ckpts.save(5, lambda d: (d / "state.pt").write_text("ok"))
    (tmp_path / step_name(5) / "COMPLETE.json").unlink()
    with pytest.raises(Exception, match="has no COMPLETE.json"):
        ckpts.resume(lambda d: None)


@pytest.mark.timeout(120)
def test_a_requeued_run_that_finds_no_checkpoint_says_so(tmp_path: Path) -> None:
    """A moved or unmounted checkpoint folder looks like "no checkpoint yet": on a restart
    (SLURM_RESTART_COUNT > 0) that start from step 0 is said, in the log and the heartbeat."""
    import subprocess

    from tests.trainguard.support import PYTHON, TRAIN_TINY, train_env

    done = subprocess.run([PYTHON, str(TRAIN_TINY), "--steps", "5",
                           "--guard", f"checkpoint_dir={tmp_path / 'moved'}",
                           "--guard", f"heartbeat_dir={tmp_path / 'hb'}"],
                          capture_output=True, text=True, timeout=100, env=train_env(SLURM_RESTART_COUNT="2"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"restart 2 found no checkpoint in {tmp_path / 'moved'}" in done.stderr
    assert "starting from step 0" in done.stderr
    beat = json.loads((tmp_path / "hb" / "rank-0.json").read_text())
    assert "restart 2" in beat["problem"] and "starting from step 0" in beat["problem"]
