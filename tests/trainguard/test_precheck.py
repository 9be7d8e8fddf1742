"""The check before a restart (trainguard.recovery.precheck): each check fails for the right reason
(run as the unprivileged test user: a read-only folder is refused by the kernel, not
skipped by root), and on the cluster a node whose scratch fails becomes a suspect and the
training restarts in place without it."""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.helpers import tmpfs
from tests.trainguard.support import PYTHON, REQUEUE_SCRIPT, TRAIN_TINY, Cluster, train_env, wait_for_step
from tests.trainguard.test_hang_slurm import HANG_ENV
from trainguard.causes import EXIT_CANNOT_SAVE
from trainguard.recovery import suspects
from trainguard.recovery.precheck import (
    NODE,
    RUN,
    check_accelerator,
    check_folder,
    check_scratch,
    check_space,
    folder_failure,
)


def test_scratch_that_cannot_be_written_fails_and_a_working_one_passes(tmp_path: Path) -> None:
    assert check_scratch(tmp_path) is None
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if os.geteuid() == 0:
        pytest.skip("root writes into a 0500 folder: run as the test user (tests/suite.py)")
    failed = check_scratch(locked)
    assert failed is not None and failed.what == "scratch" and "Permission denied" in failed.why


def test_free_space_below_the_newest_checkpoints_size_fails(tmp_path: Path) -> None:
    step = tmp_path / "step-00000009"
    step.mkdir()
    (step / "weights").write_bytes(b"x" * 1000)
    assert check_space(tmp_path, lambda _: 10_000) is None
    failed = check_space(tmp_path, lambda _: 1100)
    assert failed is not None and "1100 bytes free" in failed.why and "about 1200" in failed.why


def test_a_permission_problem_of_the_checkpoint_folder_is_the_runs_not_the_nodes(tmp_path: Path) -> None:
    assert check_folder(tmp_path / "new") is None and (tmp_path / "new").is_dir()
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    # The same on every node: left to the save check at resume (exit 4), never a suspect.
    assert check_folder(locked) is None


def test_a_gpu_named_by_the_job_but_missing_on_the_node_fails() -> None:
    present = {"/dev/nvidiactl", "/dev/nvidia0"}
    assert check_accelerator({}, present.__contains__) is None
    assert check_accelerator({"CUDA_VISIBLE_DEVICES": "0"}, present.__contains__) is None
    failed = check_accelerator({"CUDA_VISIBLE_DEVICES": "0,1"}, present.__contains__)
    assert failed is not None and "/dev/nvidia1 is missing" in failed.why


WRAPPER = """import os, runpy, sys
# Each node's own scratch folder, as $TMPDIR on a real cluster is node-local.
os.environ["TMPDIR"] = os.path.join(os.environ["SCRATCH_BASE"], os.environ["SLURMD_NODENAME"])
sys.argv[0] = {tiny!r}
runpy.run_path({tiny!r}, run_name="__main__")
"""


@pytest.mark.slurm
@pytest.mark.timeout(240)
def test_a_node_whose_scratch_fails_is_a_suspect_and_the_run_restarts_without_it(
        cluster: Cluster, tmp_path: Path) -> None:
    run, steps, out, base = tmp_path / "run", tmp_path / "steps", tmp_path / "out.log", tmp_path / "scratch"
    for node in ("node1", "node2", "node3"):
        (base / node).mkdir(parents=True)
    (base / "node2").chmod(stat.S_IRUSR | stat.S_IXUSR)      # node2's scratch refuses writes
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER.format(tiny=str(TRAIN_TINY)))
    env = {"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1", "TRAIN_NODES": "2",
           "TRAIN_SCRIPT": str(wrapper), "SCRATCH_BASE": str(base), **HANG_ENV}
    job = cluster.sbatch(REQUEUE_SCRIPT, "--steps", "60", "--step-log", str(steps), env=env,
                         sbatch_args=("-p", "spare", "-N", "3", "--ntasks-per-node=1", "-o", str(out)))
    cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=200)
    log = out.read_text()
    assert re.search(r"node node2 failed the check before the start: scratch: .*node2 does not work", log), \
        log[-3000:]
    restarted = re.search(r"restarting in place on (\S+)", log)
    assert restarted and "node2" not in restarted.group(1), log[-3000:]
    assert cluster.state(job) == "COMPLETED" and cluster.field(job, "Restarts") == "0", log[-3000:]
    wait_for_step(steps, 59, timeout=5)


def precheck_in_a_step(tmp_path: Path, checkpoints: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The guard's check before a start, as a rank of a template's job step runs it: its exit
    code, its log, the exit file. No cluster: the step's own scancel fails and is said."""
    exit_file = tmp_path / "exit-code"
    env = train_env(TRAINGUARD_RUN_DIR=str(tmp_path / "run"), TRAINGUARD_CHECKPOINT_DIR=str(checkpoints),
                    TRAINGUARD_EXIT_FILE=str(exit_file), SLURM_JOB_ID="424242", SLURM_STEP_ID="0",
                    SLURMD_NODENAME="node2", SLURM_CONF=str(tmp_path / "no-slurm.conf"))
    code = ("import os; from trainguard.config import config_from; from trainguard.recovery import precheck; "
            "precheck.run(config_from(os.environ), os.environ); print('passed')")
    return subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                          check=False), exit_file


def test_a_full_or_over_quota_checkpoint_folder_is_the_runs_problem_not_a_suspect_node(
        tmp_path: Path) -> None:
    with tmpfs(tmp_path / "shared", "2m") as shared:
        checkpoints = shared / "checkpoints"
        checkpoints.mkdir()
        subprocess.run(["dd", "if=/dev/zero", f"of={shared / 'filler'}", "bs=64k"], capture_output=True,
                       check=False)     # dd ends with ENOSPC: that is the point
        failed = check_folder(checkpoints)
        assert failed is not None and failed.scope == RUN
        assert "is full (No space left on device)" in failed.why
        proc, exit_file = precheck_in_a_step(tmp_path, checkpoints)
    assert proc.returncode == EXIT_CANNOT_SAVE and "passed" not in proc.stdout, proc.stderr
    lines = exit_file.read_text().splitlines()
    assert lines[0] == "4" and lines[2] == "step=424242.0", lines
    assert lines[1].startswith(f"cannot save: checkpoint folder: {checkpoints} is full (No space left on "
                               "device): the run's storage, not node node2; free space")
    assert "no node is a suspect" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert suspects.read(tmp_path / "run") == ([], ()), "a full shared filesystem made a node a suspect"
    # Over quota is the same; another node-local error stays the node's.
    quota = folder_failure(checkpoints, OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)))
    assert quota is not None and quota.scope == RUN and "Disk quota exceeded" in quota.why
    io_error = folder_failure(checkpoints, OSError(errno.EIO, os.strerror(errno.EIO)))
    assert io_error is not None and io_error.scope == NODE


def test_too_little_space_for_a_save_is_the_runs_problem_and_ends_the_step_with_exit_4(
        tmp_path: Path) -> None:
    with tmpfs(tmp_path / "shared", "4m") as shared:
        step = shared / "checkpoints" / "step-00000009"
        step.mkdir(parents=True)
        (step / "weights").write_bytes(b"x" * 2_500_000)   # a save needs 3 MB; 1.5 MB are free
        failed = check_space(shared / "checkpoints", lambda p: shutil.disk_usage(p).free)
        assert failed is not None and failed.scope == RUN
        proc, exit_file = precheck_in_a_step(tmp_path, shared / "checkpoints")
    assert proc.returncode == EXIT_CANNOT_SAVE, proc.stderr
    assert "bytes free in" in exit_file.read_text() and suspects.read(tmp_path / "run") == ([], ())


@pytest.mark.slurm
@pytest.mark.timeout(180)
def test_a_full_checkpoint_filesystem_ends_the_job_with_exit_4_and_no_node_is_a_suspect(
        slurm_cluster: Path, cluster: Cluster, tmp_path: Path) -> None:
    found = slurm_cluster.parent / "release.json"     # slurm_cluster: the cluster's slurm.conf
    release = json.loads(found.read_text()) if found.exists() else {}
    if release.get("root", "/") != "/":
        # slurm/dev_cluster_roots.py: the daemons of another release run chrooted in a private
        # mount namespace, bound at `up`; a tmpfs mounted by the test is not seen by its jobs.
        pytest.skip(f"Slurm {release.get('release')}'s jobs do not see a mount made after `up` "
                    "(the same case runs without Slurm above, and on the host's release)")
    run, out = tmp_path / "run", tmp_path / "out.log"
    with tmpfs(tmp_path / "shared", "2m") as shared:
        (shared / "checkpoints").mkdir()
        subprocess.run(["dd", "if=/dev/zero", f"of={shared / 'filler'}", "bs=64k"], capture_output=True,
                       check=False)
        env = {"RUN_DIR": str(run), "TRAIN_LAUNCH": "srun", "MASTER_ADDR": "127.0.0.1", "TRAIN_NODES": "2",
               "TRAINGUARD_CHECKPOINT_DIR": str(shared / "checkpoints"), **HANG_ENV}
        job = cluster.sbatch(REQUEUE_SCRIPT, "--steps", "60", env=env,
                             sbatch_args=("-p", "spare", "-N", "3", "--ntasks-per-node=1", "-o", str(out)))
        cluster.wait_state(job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=150)
    log = out.read_text()
    assert cluster.state(job) == "FAILED" and cluster.field(job, "ExitCode") == "4:0", log[-3000:]
    assert re.search(r"training exited 4 \(cannot save: checkpoint folder: \S+ is full \(No space left on "
                     r"device\): the run's storage, not node node\d", log), log[-3000:]
    assert "restarting in place" not in log and "requeueing" not in log.replace("not requeueing", "")
    assert [s for s in suspects.read(run)[0] if s.cause == "precheck"] == [], log[-3000:]
