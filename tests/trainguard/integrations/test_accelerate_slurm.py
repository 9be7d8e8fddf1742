"""An accelerate loop with accelerate_guard on the real cluster: warnings requeue and
resume bit-identically, the save switch saves and goes on, and under torchrun a signal to
one rank stops both at one step, then the kill switch ends the job without a requeue."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.trainguard.integrations.hfacc_support import (
    ACCELERATE_TINY,
    Reference,
    submit_requeue,
    three_warnings_and_a_save_switch,
    two_ranks_signal_one_then_kill_switch,
)
from tests.trainguard.support import Cluster, digest_of

pytestmark = pytest.mark.slurm
pytest.importorskip("accelerate")
STEPS = 200


@pytest.mark.timeout(300)
def test_three_warnings_and_a_save_switch_end_with_the_uninterrupted_runs_weights(
        cluster: Cluster, tmp_path: Path) -> None:
    reference = Reference(ACCELERATE_TINY, tmp_path, "--steps", str(STEPS),
                          "--guard", f"checkpoint_dir={tmp_path / 'reference'}")
    job = submit_requeue(cluster, tmp_path, ACCELERATE_TINY, "--steps", str(STEPS), "--step-sleep", "0.02")
    log = three_warnings_and_a_save_switch(cluster, tmp_path, job, STEPS)
    resumed = re.findall(r"resumed from step (\d+) \(\S+/step-0*\1\)", log)
    assert len(resumed) == 3
    assert digest_of(log) == reference.digest()


@pytest.mark.timeout(240)
def test_under_torchrun_both_ranks_stop_at_one_step_and_the_kill_switch_ends_the_job(
        cluster: Cluster, tmp_path: Path) -> None:
    log = two_ranks_signal_one_then_kill_switch(cluster, tmp_path, ACCELERATE_TINY, "--steps", "5000",
                                                "--step-sleep", "0.02")
    first = int(re.findall(r"stopping after step (\d+)", log)[0])
    ckpt = tmp_path / "run" / "checkpoints" / f"step-{first:08d}"
    assert (ckpt / "COMPLETE.json").is_file()
    rng_files = {p.name for p in ckpt.glob("random_states_*.pkl")}
    assert rng_files == {"random_states_0.pkl", "random_states_1.pkl"}
