"""TrainguardCallback without the cluster: the SIGTERM belongs to trainguard (not to
Lightning's handler, which exits 1), a corrupt newest checkpoint falls back to the
previous one, a fit that ignores trainguard's checkpoints is refused, and importing the
integrations package imports no framework."""
from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.trainguard.integrations.lightning_support import LIGHTNING_TINY
from tests.trainguard.support import PYTHON, read_steps, train_env, wait_for_step

pytest.importorskip("lightning")


def test_importing_the_integrations_package_imports_no_framework() -> None:
    code = ("import sys, trainguard.integrations; print(sorted(m for m in "
            "('torch', 'lightning', 'transformers', 'accelerate') if m in sys.modules))")
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


@pytest.mark.timeout(180)
def test_sigterm_during_fit_is_handled_once_by_trainguard_save_and_exit_143(tmp_path: Path) -> None:
    steps = tmp_path / "steps"
    proc = subprocess.Popen([PYTHON, str(LIGHTNING_TINY), "--steps", "3000", "--step-sleep", "0.02",
                             "--step-log", str(steps), "--guard", f"checkpoint_dir={tmp_path / 'ckpt'}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=train_env())
    try:
        wait_for_step(steps, 10, timeout=150)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Lightning's own SIGTERM handler would raise SIGTERMException and exit 1.
    assert proc.returncode == 143, err[-3000:]
    (step, cause), = re.findall(r"stopping after step (\d+): (\w+)", err)
    assert cause == "terminate" and re.findall(r"saved step (\d+)", err) == [step]
    assert read_steps(steps)[-1] == int(step) and "digest" not in out


def corrupt_in_place(path: Path) -> None:
    """Same size (the completeness marker still matches), unreadable content."""
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.seek(size // 2)
        handle.write(b"\0" * (size - size // 2))


def callback(checkpoint_dir: Path):
    from trainguard.integrations.lightning import TrainguardCallback
    return TrainguardCallback(checkpoint_dir=checkpoint_dir, use_slurm_endtime=False, forced_exit=0)


def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import torch

    from trainguard import CheckpointError, Checkpoints
    from trainguard.integrations.lightning import CKPT_FILE
    ckpts = Checkpoints(tmp_path)
    for step in (10, 20):
        state = {"state_dict": {"w": torch.ones(256)}, "global_step": step + 1}
        ckpts.save(step, lambda d, state=state: torch.save(state, d / CKPT_FILE))
    corrupt_in_place(tmp_path / "step-00000020" / CKPT_FILE)
    guard = callback(tmp_path)
    try:
        assert guard.ckpt_path == str(tmp_path / "step-00000010" / CKPT_FILE)
        assert "loading" in caplog.text and "step-00000020" in caplog.text
    finally:
        guard.guard.finish()
    corrupt_in_place(tmp_path / "step-00000010" / CKPT_FILE)
    guard = callback(tmp_path)
    try:
        # The damaged step 20 was set aside by the first resume; step 10 is the one left.
        with pytest.raises(CheckpointError, match="none of the 1 checkpoint"):
            _ = guard.ckpt_path
        assert (tmp_path / "damaged-step-00000020" / CKPT_FILE).exists()
    finally:
        guard.guard.finish()


@pytest.mark.timeout(120)
def test_a_fit_that_ignores_trainguards_checkpoints_is_refused(tmp_path: Path) -> None:
    # In a child process: fit() runs Lightning's signal connector in the main thread.
    code = f"""
import sys, torch, lightning.pytorch as pl
from trainguard import Checkpoints, CheckpointError
from trainguard.integrations.lightning import TrainguardCallback, CKPT_FILE
Checkpoints({str(tmp_path)!r}).save(4, lambda d: torch.save({{"state_dict": {{}}}}, d / CKPT_FILE))
class M(pl.LightningModule):
    def __init__(self): super().__init__(); self.w = torch.nn.Linear(1, 1)
    def training_step(self, batch, i): return self.w(torch.ones(1, 1)).sum()
    def configure_optimizers(self): return torch.optim.SGD(self.parameters(), lr=0.1)
    def train_dataloader(self): return range(4)
guard = TrainguardCallback(checkpoint_dir={str(tmp_path)!r}, use_slurm_endtime=False, forced_exit=0)
trainer = pl.Trainer(max_steps=2, callbacks=[guard], logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False)
try:
    trainer.fit(M())
except CheckpointError as exc:
    print("refused:", exc)
    sys.exit(0)
print("trained from scratch")
"""
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=110, env=train_env())
    assert "refused: trainguard has checkpoints in" in out.stdout, out.stderr[-3000:]
    assert "ckpt_path=<callback>.ckpt_path" in out.stdout


def test_signal_handlers_are_restored_after_the_guard_finishes(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGUSR1), signal.getsignal(signal.SIGTERM)
    guard = callback(tmp_path)
    assert signal.getsignal(signal.SIGUSR1) not in before[:1]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)    # a framework takes SIGTERM ...
    guard.guard.signals.reclaim()                    # ... and trainguard takes it back
    assert signal.getsignal(signal.SIGTERM) == signal.getsignal(signal.SIGUSR1)
    os.kill(os.getpid(), signal.SIGTERM)
    wait_for(lambda: guard.guard.signals.pending, 5, 0.01, "the flag set")
    guard.guard.finish()
    assert (signal.getsignal(signal.SIGUSR1), signal.getsignal(signal.SIGTERM)) == before
