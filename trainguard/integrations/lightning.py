"""trainguard for PyTorch Lightning: one callback.

    from trainguard.integrations.lightning import TrainguardCallback

    from trainguard import Guard, config_from
    early = Guard(config_from()).start()           # first thing: takes USR1/TERM from here on
    import lightning as L                          # seconds: a USR1 meanwhile is kept, not fatal
    from trainguard.integrations.lightning import TrainguardCallback
    guard = TrainguardCallback(guard=early)
    trainer = L.Trainer(max_steps=..., callbacks=[guard])
    trainer.fit(model, datamodule, ckpt_path=guard.ckpt_path)

Settings come from `TRAINGUARD_*` (the batch script templates set them) and keyword
arguments (`TrainguardCallback(checkpoint_dir="ckpt")`). The mapping onto Lightning:

- poll point: `on_train_batch_end`, once per optimizer step (an accumulation batch is not
  a step); step N is the (N+1)-th optimizer step, `trainer.global_step - 1`;
- save: `trainer.save_checkpoint` (called on every rank, Lightning writes on rank 0) into
  trainguard's atomic checkpoint directory `step-0000000N/lightning.ckpt`: completeness
  marker, at least two kept, older ones pruned after the new one is committed;
- stop: the checkpoint is saved at the agreed step, then `trainer.should_stop` lets Lightning
  end `fit` the way it ends for early stopping (its end-of-training hooks run); the callback's
  `teardown` then exits with the cause's code (140: the template requeues);
- training health: the loss of each batch (a reference, read about once a second: no
  device sync per step), its size (`extract_batch_size`) and the time Lightning spent
  fetching it (from one batch's end to the next one's start);
- resume: `ckpt_path=guard.ckpt_path`, the newest checkpoint that loads (a corrupt newest one
  falls back to the previous with a warning); None when there is none.

Signals: the callback installs trainguard's USR1/TERM handlers when it is created, so
Lightning's SLURM auto-requeue (which installs its USR1 handler only when none is there)
never installs its own; Lightning replaces the SIGTERM handler when `fit` starts, and the
callback takes it back in `on_train_start`. No plugin setting is needed: a signal is
handled once, by trainguard (one save, one exit code, one requeue by the batch script).
"""
from __future__ import annotations

import logging
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.data import extract_batch_size

from trainguard.checkpoints.checkpoint import CheckpointError
from trainguard.config import GuardConfig, config_from
from trainguard.guard import Guard

log = logging.getLogger("trainguard")
CKPT_FILE = "lightning.ckpt"


class TrainguardCallback(pl.Callback):
    """trainguard's save/stop/requeue for `Trainer.fit`. `settings` are trainguard settings
    (see `trainguard.config_from`); `config` replaces them entirely."""

    def __init__(self, config: GuardConfig | None = None, guard: Guard | None = None,
                 **settings: Any) -> None:
        super().__init__()
        if guard is not None and (config is not None or settings):
            raise ValueError("TrainguardCallback: pass either guard= or settings, not both")
        # `guard`: started before `import lightning` (5-7 s, during which a USR1 would kill
        # the process with exit 138 and no requeue); it gets Lightning's save here.
        cfg = config if config is not None else config_from(**settings)
        self.guard = (guard.attach(self._write, save_all_ranks=True) if guard is not None
                      else Guard(cfg, save=self._write, save_all_ranks=True))
        self._trainer: pl.Trainer | None = None
        self._last_step = -1
        self._resolved = False
        self._stopping: tuple[Any, int] | None = None
        self._validating: AbstractContextManager[None] | None = None
        self._batch_end: float | None = None
        # As early as possible: a USR1 before this point kills the process, and Lightning
        # installs its own USR1 handler (auto-requeue) only if none is installed.
        self.guard.start()

    # ---- resume ----------------------------------------------------------------------------
    @property
    def ckpt_path(self) -> str | None:
        """The checkpoint file `Trainer.fit(ckpt_path=...)` should resume from: the newest
        one that loads, or None (a fresh start). Raises CheckpointError when checkpoints
        exist but none loads (never silently start over)."""
        if not self._resolved:
            self._resolved = True
            ckpts = self.guard.checkpoints
            start_over = self.guard.config.start_over
            self.guard.resumed = ckpts.resume(_check_loadable, start_over) if ckpts is not None else None
        resumed = self.guard.resumed
        return str(resumed.path / CKPT_FILE) if resumed is not None else None

    def _write(self, directory: Path) -> None:
        assert self._trainer is not None, "a save before Trainer.fit started"
        self._trainer.save_checkpoint(directory / CKPT_FILE)

    # ---- Lightning hooks -------------------------------------------------------------------
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._trainer = trainer

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning has just installed its SIGTERM handler (it raises SIGTERMException and
        # exits 1, and broadcasts from inside the handler): trainguard owns the signals.
        self.guard.signals.reclaim()
        self._refuse_silent_restart(trainer)
        self._last_step = self.guard.resume() - 1

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        # From the previous batch's end to here, Lightning fetched this batch: the data wait.
        health = self.guard.health
        if health is not None and self._batch_end is not None:
            health.data_time += time.monotonic() - self._batch_end

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        # Training health: the loss Lightning returns (a reference; trainguard reads it about
        # once a second) and the batch's size, for every batch (accumulation ones too).
        self.guard.observe(loss=_loss_of(outputs), samples=_batch_size(batch))
        self._batch_end = time.monotonic()
        step = trainer.global_step - 1
        if step == self._last_step or self._stopping is not None:
            return       # a gradient-accumulation batch: no optimizer step, no poll
        self._last_step = step
        decision = self.guard.check(step)
        if decision is None:
            return
        if not decision.action.stop:
            self.guard.act(decision, step)     # save (e.g. the save switch) and go on
            return
        self._stop(trainer, decision, step)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # A validation run is no training step: the hang watchdog gives it the eval budget
        # (hang_eval) instead of taking a long one for a hang.
        self._validating = self.guard.phase("eval")
        self._validating.__enter__()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        validating, self._validating = self._validating, None
        if validating is not None:
            validating.__exit__(None, None, None)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self._stopping is None:
            if stage == "fit":
                self.guard.finish(self._last_step)   # trained to the end: handlers back, last heartbeat
            return
        decision, step = self._stopping
        self.guard.act(decision, step)         # saved already: logs, finishes, exits

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        if not isinstance(exception, SystemExit):
            # Lightning re-raises: the process exits non-zero and is not requeued. No save
            # here: a save is collective under DDP and the peers are elsewhere.
            self.guard.finish(phase="failed")

    # ---- stopping --------------------------------------------------------------------------
    def _stop(self, trainer: pl.Trainer, decision: Any, step: int) -> None:
        # Save now, at the step the ranks agreed on: once the loop winds down, Lightning's
        # progress counters no longer describe a step boundary.
        if decision.save:
            self.guard.save(step)
        self._stopping = (decision, step)
        # min_epochs/min_steps would keep training after a stop request; the job's end does not wait.
        trainer.fit_loop.min_epochs = None
        trainer.fit_loop.epoch_loop.min_steps = None
        trainer.should_stop = True

    def _refuse_silent_restart(self, trainer: pl.Trainer) -> None:
        ckpts = self.guard.checkpoints
        if ckpts is None or self._resolved or not ckpts.complete():
            return
        raise CheckpointError(
            f"trainguard has checkpoints in {ckpts.root} but fit() was not given one of them: "
            "pass ckpt_path=<callback>.ckpt_path to Trainer.fit (refusing to start over silently)")


def _loss_of(outputs: Any) -> Any:
    """The loss in what `training_step` returned (a tensor, or a dict with "loss")."""
    if isinstance(outputs, dict):
        return outputs.get("loss")
    return outputs


def _batch_size(batch: Any) -> int:
    try:
        return int(extract_batch_size(batch))
    except Exception:  # noqa: BLE001 - a batch Lightning cannot size is counted as none
        return 0


def _check_loadable(directory: Path) -> None:
    """Raises when the checkpoint file does not load (truncated, corrupt); mmap keeps the
    check cheap (the tensors are not read)."""
    import torch  # Lightning imported it already

    path = directory / CKPT_FILE
    # weights_only=False: a Lightning checkpoint holds plain Python objects (hparams, loops);
    # this is the training's own file, written by trainer.save_checkpoint.
    checkpoint = torch.load(path, map_location="cpu", mmap=True, weights_only=False)
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(f"{path}: not a Lightning checkpoint (no state_dict)")


__all__ = ["CKPT_FILE", "TrainguardCallback"]
