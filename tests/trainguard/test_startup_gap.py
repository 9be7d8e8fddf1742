"""No gap at start-up (issue 22 item 6): a USR1 that arrives while the training still imports
its framework (torch, Lightning, transformers, accelerate: seconds) is caught by a guard
started before the import, and the run saves and exits 140 at its first step instead of
dying with exit 138 (no requeue)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.trainguard.support import PYTHON, REPO, train_env

EXAMPLES = REPO / "slurm" / "examples"
USR1_BIT = 1 << (signal.SIGUSR1 - 1)


def catches_usr1(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & USR1_BIT)
    return False


def torch_loaded(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("example", ["lightning_tiny.py", "hf_tiny.py", "accelerate_tiny.py"])
def test_a_usr1_during_the_framework_import_is_caught_saved_and_requeued(
        tmp_path: Path, example: str) -> None:
    ckpt = tmp_path / "ckpt"
    # The HF Trainer saves into its output_dir, which is trainguard's checkpoint folder.
    where = ["--output-dir", str(ckpt)] if example == "hf_tiny.py" else ["--guard", f"checkpoint_dir={ckpt}"]
    proc = subprocess.Popen([PYTHON, str(EXAMPLES / example), "--steps", "50", *where],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=train_env(), cwd=tmp_path)
    try:
        wait_for(lambda: proc.poll() is None and catches_usr1(proc.pid), 60, 0.005,
                 f"{example} catching USR1")
        # The guard is the first thing: the framework (and torch) is not loaded yet, so this
        # signal arrives in the middle of the imports.
        importing = not torch_loaded(proc.pid)
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGUSR1)
        out, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert importing, f"{example}: torch was loaded before USR1 was caught: a gap at start-up"
    assert proc.returncode == 140, (proc.returncode, err[-3000:])
    assert "received SIGUSR1" in err, err[-3000:]
    assert ckpt.is_dir() and any(ckpt.iterdir()), f"nothing saved in {ckpt} ({time.monotonic() - sent:.1f} s)"
