"""Running slurm/examples/lightning_tiny.py: locally, and through train-requeue.slurm."""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests.trainguard.support import PYTHON, REPO, REQUEUE_SCRIPT, Cluster, digest_of, train_env

LIGHTNING_TINY = REPO / "slurm" / "examples" / "lightning_tiny.py"


def run_lightning(*args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, str(LIGHTNING_TINY), *args], capture_output=True, text=True,
                          timeout=timeout, env=train_env())


def lightning_digest(*args: str) -> str:
    proc = run_lightning(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return digest_of(proc.stdout)


def submit_lightning(cluster: Cluster, tmp_path: Path, *train_args: str, sbatch_args: tuple[str, ...] = (),
                     env: dict[str, str] | None = None) -> str:
    """lightning_tiny.py through the batch script template, with the Lightning defaults
    (SLURMEnvironment with auto-requeue on): only the callback is added."""
    return cluster.sbatch(REQUEUE_SCRIPT, *train_args, "--step-log", str(tmp_path / "steps"),
                          "--root", str(tmp_path / "root"),
                          sbatch_args=("-o", str(tmp_path / "out.log"), *sbatch_args),
                          env={"RUN_DIR": str(tmp_path / "run"), "TRAIN_SCRIPT": str(LIGHTNING_TINY),
                               **(env or {})})
