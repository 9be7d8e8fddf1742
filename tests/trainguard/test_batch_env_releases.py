"""The batch script's environment differs between Slurm releases: 26.05 sets SLURM_STEP_ID=-5
(and SLURM_STEPID) in the batch script, which 22.05 and 24.11 leave unset (recorded on the dev
cluster with `sbatch -p low -n 4 --wrap 'env | sort'`). A training launched directly by the
batch script is one process, never rank 0 of SLURM_NTASKS."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TINY = Path(__file__).resolve().parents[2] / "slurm" / "train_tiny.py"
BATCH_26_05 = {"SLURM_NTASKS": "4", "SLURM_OOM_KILL_STEP": "0", "SLURM_PROCID": "0",
               "SLURM_STEPID": "-5", "SLURM_STEP_ID": "-5"}
BATCH_24_11 = {"SLURM_NTASKS": "4", "SLURM_OOM_KILL_STEP": "0", "SLURM_PROCID": "0"}


@pytest.fixture(scope="module")
def tiny() -> ModuleType:
    """slurm/train_tiny.py, a script, loaded by its path."""
    spec = importlib.util.spec_from_file_location("train_tiny_under_test", TINY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("env", [BATCH_26_05, BATCH_24_11], ids=["26.05", "24.11"])
def test_a_training_started_by_the_batch_script_is_one_process(
        tiny: ModuleType, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in ("SLURM_STEP_ID", "SLURM_STEPID", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert tiny.world() == (0, 1)


def test_inside_an_srun_step_each_task_is_a_rank(tiny: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for name, value in {"SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4"}.items():
        monkeypatch.setenv(name, value)
    assert tiny.world() == (3, 4)
    monkeypatch.setenv("SLURM_STEP_ID", "4294967291")   # the batch step's id in some releases
    assert tiny.world() == (0, 1)
