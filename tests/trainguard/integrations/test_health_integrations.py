"""Training health with no user code: the Lightning callback, the HF Trainer callback and
the accelerate guard feed the loss (and, where the framework knows it, the batch size) to
trainguard; the heartbeat shows them. Real trainings of slurm/examples/, as processes."""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from tests.trainguard.integrations.hfacc_support import ACCELERATE_TINY, HF_TINY
from tests.trainguard.integrations.lightning_support import LIGHTNING_TINY
from tests.trainguard.support import PYTHON, train_env
from trainguard.health.record import TrainingHealth
from trainguard.heartbeat import read_heartbeats

HEALTH = ("--guard", "health_window=1s", "--guard", "health_warmup=0", "--guard", "heartbeat_every=0.2s")


def health_of(tmp_path: Path, script: Path, *args: str) -> TrainingHealth:
    done = subprocess.run([PYTHON, str(script), "--step-sleep", "0.02", *HEALTH,
                           "--guard", f"heartbeat_dir={tmp_path / 'hb'}", *args],
                          capture_output=True, text=True, timeout=300, env=train_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [beat] = read_heartbeats(tmp_path / "hb")
    assert beat.health is not None
    return beat.health


@pytest.mark.timeout(300)
def test_lightning_feeds_the_loss(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    health = health_of(tmp_path, LIGHTNING_TINY, "--steps", "150", "--root", str(tmp_path / "pl"),
                       "--guard", f"checkpoint_dir={tmp_path / 'ckpt'}")
    assert health.loss is not None and math.isfinite(health.loss) and health.loss_step > 0
    # The example's batches are step numbers (it builds the tensors in training_step):
    # Lightning cannot size them, so throughput is counted in steps.
    assert health.unit == "steps" and health.steps_per_s > 0


def test_lightning_sizes_a_batch_of_tensors_and_counts_an_unsizable_one_as_none() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("lightning")
    from trainguard.integrations.lightning import _batch_size

    assert _batch_size((torch.zeros(8, 3), torch.zeros(8))) == 8
    assert _batch_size({"input_ids": torch.zeros(4, 16)}) == 4
    assert _batch_size(7) == 0


@pytest.mark.timeout(300)
def test_the_hf_trainer_feeds_its_logged_loss_and_the_batch_size(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    health = health_of(tmp_path, HF_TINY, "--steps", "120", "--output-dir", str(tmp_path / "out"))
    assert health.loss is not None and math.isfinite(health.loss)
    assert health.unit == "samples" and health.samples_per_s > 0


@pytest.mark.timeout(300)
def test_accelerate_backward_feeds_the_loss(tmp_path: Path) -> None:
    pytest.importorskip("accelerate")
    health = health_of(tmp_path, ACCELERATE_TINY, "--steps", "150",
                       "--guard", f"checkpoint_dir={tmp_path / 'ckpt'}")
    assert health.loss is not None and math.isfinite(health.loss) and health.loss_step > 0
    assert health.steps_per_s > 0
