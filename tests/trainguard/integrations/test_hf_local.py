"""The HF integration without the cluster: which checkpoint a resume picks, what pruning
keeps, what the callback refuses at Trainer init, and a SIGTERM handled once."""
from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from tests.helpers import wait_for
from tests.trainguard.integrations.hfacc_support import HF_TINY
from tests.trainguard.support import PYTHON, read_steps, train_env
from trainguard import CheckpointError, config_from
from trainguard.checkpoints.checkpoint import mark_complete
from trainguard.integrations.hf import TrainguardCallback, latest_checkpoint, prune


def fake_checkpoint(root: Path, step: int, complete: bool = True) -> Path:
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"w" * 100)
    (path / "trainer_state.json").write_text("{}")
    if complete:
        mark_complete(path, step)
    return path


def test_resume_skips_a_cut_off_save_and_a_truncated_file_and_pruning_keeps_two(tmp_path: Path) -> None:
    for step in (10, 20, 30):
        fake_checkpoint(tmp_path, step)
    with open(tmp_path / "checkpoint-30" / "model.safetensors", "r+b") as f:
        f.truncate(50)                                   # cut off after the marker: corrupt
    fake_checkpoint(tmp_path, 40, complete=False)        # SIGKILL during the save
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-20")
    fake_checkpoint(tmp_path, 50)
    prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-20", "checkpoint-50"]
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-50")
    assert latest_checkpoint(tmp_path / "nothing-yet") is None


def test_unmarked_trainer_checkpoints_are_an_error_not_a_silent_fresh_start(tmp_path: Path) -> None:
    fake_checkpoint(tmp_path, 500, complete=False)
    with pytest.raises(CheckpointError, match=r"checkpoint-500.*resume_from_checkpoint"):
        latest_checkpoint(tmp_path)


@pytest.mark.parametrize(("setting", "message"), [
    ({"enable_jit_checkpoint": True},
     r"enable_jit_checkpoint = True.*SIGTERM.*set enable_jit_checkpoint=False"),
    ({"save_total_limit": 1}, r"save_total_limit = 1: expected None or 2 or more"),
])
def test_settings_that_would_fight_trainguard_are_refused_when_the_trainer_is_built(
        tmp_path: Path, setting: dict[str, Any], message: str) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    before = signal.getsignal(signal.SIGTERM)
    callback = TrainguardCallback(config_from(fast_exit=False, forced_exit=0))
    try:
        args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", **setting)
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, n_positions=8, vocab_size=32))
        with pytest.raises(ValueError, match=message):
            Trainer(model=model, args=args, callbacks=[callback])
    finally:
        callback.guard.finish()
    # The Trainer's JIT handler, installed before the refusal, is gone with trainguard's.
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_sigterm_with_the_trainers_defaults_saves_once_and_exits_143(tmp_path: Path) -> None:
    steps = tmp_path / "steps"
    proc = subprocess.Popen([PYTHON, str(HF_TINY), "--steps", "2000", "--step-sleep", "0.05",
                             "--step-log", str(steps), "--output-dir", str(tmp_path / "out"),
                             "--guard", "save_estimate=1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=train_env(), cwd=tmp_path)
    try:
        wait_for(lambda: steps.exists() and len(read_steps(steps)) >= 5, 90, 0.1, "training started")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, out[-3000:]
    saved = re.findall(r"trainguard: saved step (\d+)", out)
    assert len(saved) == 1, out[-3000:]
    assert re.search(rf"stopping after step {saved[0]}: terminate -> exit 143 "
                     rf"\(checkpoint saved at step {saved[0]}: not requeued\)", out)
    checkpoints = list((tmp_path / "out").glob("checkpoint-*"))
    assert [c.name for c in checkpoints] == [f"checkpoint-{saved[0]}"]
    assert (checkpoints[0] / "COMPLETE.json").is_file()


def test_an_early_guard_with_its_own_save_function_is_refused(tmp_path: Path) -> None:
    from trainguard import Guard

    guard = Guard(config_from(checkpoint_dir=tmp_path, fast_exit=False, forced_exit=0),
                  save=lambda d: None)
    with pytest.raises(ValueError, match="without save/load functions"):
        TrainguardCallback(guard=guard)
    guard.finish()
