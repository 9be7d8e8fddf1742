"""accelerate_guard without the cluster, with a real Accelerator: a corrupt newest
checkpoint falls back to the previous one through load_state, and automatic checkpoint
naming (which would bypass trainguard's directory) is refused."""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
accelerate = pytest.importorskip("accelerate")

from trainguard import config_from  # noqa: E402 - after the skips
from trainguard.integrations.accelerate import accelerate_guard  # noqa: E402 - after the skips


def prepared(accelerator):
    model = torch.nn.Linear(4, 2)
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    return accelerator.prepare(model, optim)


def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_through_load_state(tmp_path: Path) -> None:
    accelerator = accelerate.Accelerator(cpu=True)
    model, optim = prepared(accelerator)
    config = config_from(checkpoint_dir=tmp_path, fast_exit=False, forced_exit=0)
    guard = accelerate_guard(accelerator, config)
    try:
        weights = {}
        for step in (10, 20):
            with torch.no_grad():
                model.weight.fill_(float(step))
            guard.save(step)
            weights[step] = model.weight.detach().clone()
    finally:
        guard.finish()
    newest = tmp_path / "step-00000020" / "model.safetensors"
    newest.write_bytes(b"\0" * newest.stat().st_size)   # same size: only loading can tell
    with torch.no_grad():
        model.weight.zero_()
    again = accelerate_guard(accelerator, config)
    try:
        assert again.resume() == 11
    finally:
        again.finish()
    assert torch.equal(model.weight, weights[10])


def test_automatic_checkpoint_naming_is_refused(tmp_path: Path) -> None:
    from accelerate.utils import ProjectConfiguration  # type: ignore[import-untyped]  # no types shipped

    accelerator = accelerate.Accelerator(cpu=True, project_config=ProjectConfiguration(
        project_dir=str(tmp_path), automatic_checkpoint_naming=True))
    with pytest.raises(ValueError, match="automatic_checkpoint_naming=True.*set it to False"):
        accelerate_guard(accelerator, config_from(checkpoint_dir=tmp_path))
