"""The Hugging Face Trainer with TrainguardCallback on the real cluster: warnings requeue
and resume bit-identically, the save switch saves and goes on, and under torchrun a signal
to one rank stops both at one step, then the kill switch ends the job without a requeue."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.trainguard.integrations.hfacc_support import (
    HF_TINY,
    Reference,
    submit_requeue,
    three_warnings_and_a_save_switch,
    two_ranks_signal_one_then_kill_switch,
)
from tests.trainguard.support import Cluster, digest_of

pytestmark = pytest.mark.slurm
pytest.importorskip("transformers")
STEPS = 80


@pytest.mark.timeout(300)
def test_three_warnings_and_a_save_switch_end_with_the_uninterrupted_runs_weights(
        cluster: Cluster, tmp_path: Path) -> None:
    reference = Reference(HF_TINY, tmp_path, "--steps", str(STEPS),
                          "--output-dir", str(tmp_path / "reference"))
    job = submit_requeue(cluster, tmp_path, HF_TINY, "--steps", str(STEPS), "--step-sleep", "0.05")
    log = three_warnings_and_a_save_switch(cluster, tmp_path, job, STEPS)
    # Each run resumed from the Trainer's checkpoint of the step the previous one stopped at.
    resumed = [int(s) for s in re.findall(r"resumed from step (\d+) \(\S+/checkpoint-\1\)", log)]
    assert len(resumed) == 3
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("checkpoint-*"))
    assert len(checkpoints) == 2 and all((c / "COMPLETE.json").is_file() for c in checkpoints)
    assert digest_of(log) == reference.digest()


@pytest.mark.timeout(240)
def test_under_torchrun_both_ranks_stop_at_one_step_and_the_kill_switch_ends_the_job(
        cluster: Cluster, tmp_path: Path) -> None:
    log = two_ranks_signal_one_then_kill_switch(cluster, tmp_path, HF_TINY, "--steps", "2000",
                                                "--step-sleep", "0.05", steps_done_at_stop=0)
    first = int(re.findall(r"stopping after step (\d+)", log)[0])
    ckpt = tmp_path / "run" / "checkpoints" / f"checkpoint-{first}"
    assert (ckpt / "COMPLETE.json").is_file()
    assert {p.name for p in ckpt.glob("rng_state_*.pth")} == {"rng_state_0.pth", "rng_state_1.pth"}
