"""The checkpoint disk fills up during a stop save: a real, small tmpfs, filled to the last
block while the real example training runs (as the ordinary user wdtest). The stop save
fails; the guard says what happened, keeps the last good checkpoint, removes the partial
one and exits 4 without a requeue (no traceback, no "the training raised OSError")."""
from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import tmpfs, wait_for
from tests.trainguard.support import PYTHON, TRAIN_TINY, read_steps, train_env
from trainguard.checkpoints.checkpoint import Checkpoints, is_complete, step_name


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs owned by the user running the test (mounted by tests/privileged.py)."""
    with tmpfs(tmp_path / "disk", "4m") as where:
        yield where


def _fill(folder: Path) -> None:
    """Take every free block."""
    subprocess.run(["dd", "if=/dev/zero", f"of={folder / 'filler'}", "bs=64k"], capture_output=True,
                   check=False)


@pytest.mark.timeout(180)
def test_a_stop_save_on_a_full_disk_keeps_the_last_good_checkpoint_and_says_why(small_disk: Path,
                                                                               tmp_path: Path) -> None:
    ckpt = small_disk / "ckpt"
    steps = tmp_path / "steps"   # the step log: not on the full disk
    proc = subprocess.Popen([PYTHON, str(TRAIN_TINY), "--steps", "2000",
                             "--step-sleep", "0.02", "--save-every", "10", "--step-log", str(steps),
                             "--guard", f"checkpoint_dir={ckpt}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=train_env(), cwd="/")
    try:
        wait_for(lambda: steps.exists() and len(read_steps(steps)) >= 25, 60, 0.05, "step 25")
        _fill(small_disk)
        proc.send_signal(signal.SIGUSR1)   # the time-limit warning: save and requeue
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 4, err[-3000:]               # EXIT_CANNOT_SAVE: no requeue
    assert "Traceback" not in err and "the training raised" not in err
    assert "but saving it failed: the checkpoint disk is full" in err
    assert "not requeued: a requeued run would resume from an older checkpoint" in err
    last = Checkpoints(ckpt).latest()
    assert last is not None and is_complete(last.path) and last.step >= 19
    assert f"the last good checkpoint, step {last.step}" in err
    assert not list(ckpt.glob(".tmp-step-*"))              # the partial save is gone
    assert (ckpt / step_name(last.step)).stat().st_uid == os.getuid()   # the user who trains
