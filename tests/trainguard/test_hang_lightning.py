"""Lightning: a validation run longer than the step budget is not a hang (the callback marks
it as the `eval` phase), and the same validation with a shorter eval budget is one."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.trainguard.support import PYTHON, train_env

pytest.importorskip("lightning")

FIT = """
import sys, time, torch, lightning.pytorch as pl
from trainguard.integrations.lightning import TrainguardCallback
class M(pl.LightningModule):
    def __init__(self): super().__init__(); self.w = torch.nn.Linear(1, 1)
    def training_step(self, batch, i): time.sleep(0.01); return self.w(torch.ones(1, 1)).sum()
    def validation_step(self, batch, i): time.sleep(0.6)
    def configure_optimizers(self): return torch.optim.SGD(self.parameters(), lr=0.1)
    def train_dataloader(self): return range(200)
    def val_dataloader(self): return range(4)
guard = TrainguardCallback(checkpoint_dir=sys.argv[1], heartbeat_dir=sys.argv[1] + "/hb",
                           use_slurm_endtime=False, forced_exit=0, hang_floor=1, hang_first_step=5,
                           hang_grace=0.2, hang_eval=sys.argv[2])
trainer = pl.Trainer(max_steps=150, val_check_interval=100, num_sanity_val_steps=0, callbacks=[guard],
                     logger=False, enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False)
trainer.fit(M(), ckpt_path=guard.ckpt_path)
print("fit done")
"""


@pytest.mark.timeout(180)
def test_a_validation_longer_than_the_step_budget_is_not_a_hang_under_lightning(tmp_path: Path) -> None:
    # Steps of ~10 ms learn the 1 s floor; the validation takes 4 x 0.6 s. Both fits at
    # once: most of their time is importing Lightning.
    runs = [subprocess.Popen([PYTHON, "-c", FIT, str(tmp_path / name), eval_budget], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=train_env())
            for name, eval_budget in (("long", "60"), ("short", "1"))]
    (ok_out, ok_err), (_, short_err) = (run.communicate(timeout=170) for run in runs)
    assert runs[0].returncode == 0 and "fit done" in ok_out, ok_err[-3000:]
    assert "HANG" not in ok_err
    assert runs[1].returncode == 140, short_err[-3000:]
    assert "HANG: no progress for" in short_err and "in phase eval after step 99" in short_err
