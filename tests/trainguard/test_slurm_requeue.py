"""train-requeue.slurm on the real cluster: warnings, time limit, preemption, scancel,
exceptions and the save switch, each through a real batch job and real signals."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.helpers import sh, wait_for
from tests.trainguard.support import (
    REQUEUE_SCRIPT,
    TRAIN_TINY,
    Cluster,
    assert_no_gap_no_repeat,
    digest_of,
    read_steps,
    wait_for_step,
)

pytestmark = pytest.mark.slurm


def submit(cluster: Cluster, tmp_path: Path, *train_args: str, sbatch_args: tuple[str, ...] = ()) -> str:
    return cluster.sbatch(REQUEUE_SCRIPT, *train_args, "--step-log", str(tmp_path / "steps"),
                          sbatch_args=("-o", str(tmp_path / "out.log"), *sbatch_args),
                          env={"RUN_DIR": str(tmp_path / "run")})


def last_step(tmp_path: Path) -> int:
    steps = read_steps(tmp_path / "steps") if (tmp_path / "steps").exists() else []
    return steps[-1] if steps else -1


def stops(log: str) -> list[tuple[int, str, int]]:
    """(step, cause, exit code) of every 'stopping after step' line."""
    return [(int(m[0]), m[1], int(m[2])) for m in
            re.findall(r"stopping after step (\d+): (\w+).*?-> exit (\d+)", log)]


@pytest.mark.timeout(180)
def test_three_warnings_requeue_and_the_result_equals_an_uninterrupted_run(
        cluster: Cluster, tmp_path: Path, reference_digest) -> None:
    job = submit(cluster, tmp_path, "--steps", "300", "--step-sleep", "0.03")
    for restart in (1, 2, 3):
        wait_for_step(tmp_path / "steps", last_step(tmp_path) + 20)
        sh("scancel", "--batch", "--signal=USR1", job)      # like SLURM's warning: the shell only
        cluster.release_when_requeued(job, restart)
    cluster.wait_state(job, ("COMPLETED",), timeout=90)
    log = (tmp_path / "out.log").read_text()
    assert [(cause, code) for _, cause, code in stops(log)] == [("user_signal", 140)] * 3
    assert len(re.findall(r"exited 140 \(.*; checkpoint saved at step \d+\): requeueing", log)) == 3
    assert_no_gap_no_repeat(read_steps(tmp_path / "steps"), 300)
    assert digest_of(log) == reference_digest("--steps", "300")


@pytest.mark.timeout(180)
def test_the_time_limit_warning_saves_requeues_and_resumes_at_the_next_step(
        cluster: Cluster, tmp_path: Path, reference_digest) -> None:
    # 45 s of training in a 1-minute job: the USR1@50 warning (SLURM sends it 3-40 s after
    # the start, at its next periodic check) interrupts the first run. A small margin, so
    # that it is the signal that acts and not the guard's own reading of EndTime.
    job = submit(cluster, tmp_path, "--steps", "300", "--step-sleep", "0.15",
                 "--guard", "save_estimate=1", "--guard", "safety_margin=2",
                 sbatch_args=("--time=1", "--signal=B:USR1@50"))
    # Then, as an admin would, give the requeued job 5 minutes so that it finishes.
    cluster.release_when_requeued(job, 1, 90, "TimeLimit=5")
    cluster.wait_state(job, ("COMPLETED",), timeout=90)
    log = (tmp_path / "out.log").read_text()
    assert "got SIGUSR1" in log
    (step, cause, code), = stops(log)
    assert (cause, code) == ("time_limit", 140)
    assert f"resumed from step {step} " in log                # the next run goes on at N + 1
    assert_no_gap_no_repeat(read_steps(tmp_path / "steps"), 300)
    assert digest_of(log) == reference_digest("--steps", "300")


@pytest.mark.timeout(150)
def test_a_preempted_job_saves_within_the_grace_time_and_resumes_with_nothing_lost(
        cluster: Cluster, tmp_path: Path, reference_digest) -> None:
    # No signal reaches a batch-only job during GraceTime: EndTime moving to now + 20 s is
    # the only sign, so it is re-read every 2 s here.
    job = submit(cluster, tmp_path, "--steps", "300", "--step-sleep", "0.05",
                 "--guard", "endtime_every=2", sbatch_args=("-p", "low", "-n", "4", "--time=10"))
    wait_for_step(tmp_path / "steps", 30)
    preempted_at = time.monotonic()
    high = cluster.sbatch(None, sbatch_args=(
        "-p", "high", "-n", "4", "-o", "/dev/null", "--wrap", "sleep 2"))
    stop_seen = wait_for(lambda: stops((tmp_path / "out.log").read_text()), 20, 0.2, "a stop")
    saved_within = time.monotonic() - preempted_at
    assert stop_seen[0][1:] == ("preemption", 140)
    assert saved_within < 20, saved_within
    cluster.wait_state(high, ("COMPLETED",), timeout=60)
    cluster.release_when_requeued(job, 1)
    cluster.wait_state(job, ("COMPLETED",), timeout=90)
    log = (tmp_path / "out.log").read_text()
    assert f"resumed from step {stop_seen[0][0]}" in log
    assert_no_gap_no_repeat(read_steps(tmp_path / "steps"), 300)
    assert digest_of(log) == reference_digest("--steps", "300")


@pytest.mark.timeout(90)
def test_a_plain_scancel_saves_in_time_and_is_not_requeued(cluster: Cluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "--steps", "3000", "--step-sleep", "0.02")
    wait_for_step(tmp_path / "steps", 20)
    sh("scancel", job)
    cluster.wait_state(job, ("CANCELLED",), timeout=30)
    log = wait_for(lambda: "not requeueing" in (t := (tmp_path / "out.log").read_text()) and t, 15)
    (step, cause, code), = stops(log)
    assert (cause, code) == ("terminate", 143)
    assert re.search(r"training exited 143 \(terminate after step \d+; checkpoint saved at step \d+\): "
                     r"not requeueing", log)
    assert (tmp_path / "run" / "checkpoints" / f"step-{step:08d}").is_dir()
    time.sleep(3)
    assert cluster.state(job) == "CANCELLED" and cluster.field(job, "Restarts") == "0"


@pytest.mark.timeout(90)
def test_an_exception_saves_exits_1_and_is_not_requeued(cluster: Cluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "--steps", "200", "--raise-error", "--error-step", "30")
    cluster.wait_state(job, ("FAILED",), timeout=60)
    log = (tmp_path / "out.log").read_text()
    assert "RuntimeError: injected error at step 30" in log
    assert stops(log) == [(29, "exception", 1)]
    assert (tmp_path / "run" / "checkpoints" / "step-00000029").is_dir()
    assert re.search(r"training exited 1( \(.*\))?: not requeueing", log)
    assert cluster.field(job, "ExitCode") == "1:0" and cluster.field(job, "Restarts") == "0"


@pytest.mark.timeout(90)
def test_the_save_switch_saves_removes_the_file_and_training_goes_on(
        cluster: Cluster, tmp_path: Path, reference_digest) -> None:
    job = submit(cluster, tmp_path, "--steps", "300", "--step-sleep", "0.02")
    wait_for_step(tmp_path / "steps", 20)
    switch = tmp_path / "run" / "SAVE"
    switch.touch()
    wait_for(lambda: not switch.exists(), 20, 0.1, "the save switch removed")
    saved_at = last_step(tmp_path)
    cluster.wait_state(job, ("COMPLETED",), timeout=60)
    log = (tmp_path / "out.log").read_text()
    saved = [int(s) for s in re.findall(r"saved step (\d+)", log)]
    assert len(saved) == 1 and saved[0] <= saved_at < 299 and stops(log) == []
    assert cluster.field(job, "Restarts") == "0"
    assert digest_of(log) == reference_digest("--steps", "300")


@pytest.mark.timeout(90)
def test_without_the_template_self_requeue_asks_scontrol_itself(
        cluster: Cluster, tmp_path: Path) -> None:
    # `exec`: python is the batch step's process itself, so it gets the shell's signal.
    wrap = (f"exec python3 {TRAIN_TINY} --steps 3000 --step-sleep 0.02 --step-log {tmp_path / 'steps'} "
            f"--guard checkpoint_dir={tmp_path / 'ckpt'} --guard self_requeue=true")
    job = cluster.sbatch(None, sbatch_args=("--requeue", "--open-mode=append", "-o",
                                            str(tmp_path / "out.log"), "--wrap", wrap))
    wait_for_step(tmp_path / "steps", 20)
    sh("scancel", "--batch", "--signal=USR1", job)
    wait_for(lambda: cluster.field(job, "Restarts") == "1", 30, 0.25, "the job requeued by trainguard")
    log = (tmp_path / "out.log").read_text()
    (step, cause, code), = stops(log)
    assert (cause, code) == ("user_signal", 140)
    assert (tmp_path / "ckpt" / f"step-{step:08d}").is_dir()
