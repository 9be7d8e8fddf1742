"""trainguard for `accelerate` loops: the guard's checkpoints are the Accelerator's own.

    accelerator = Accelerator()
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    guard = accelerate_guard(accelerator)          # signals are caught from here on
    with guard:                                    # an exception: save, exit 1, no requeue
        for step in range(guard.resume(), steps):  # load_state of the newest complete checkpoint
            train_step(step)                       # (the data position follows from `step`);
                                                   # accelerator.backward(loss) feeds the loss
            guard.step(step)                       # save_state + exit 140 at the agreed step
        guard.finish(step)

`save_state` runs on every rank into trainguard's temporary directory, which is then
committed atomically (fsync, completeness marker, rename), the newest `keep` (>= 2) kept;
`resume()` calls `load_state` on the newest complete checkpoint and falls back to the
previous one if loading fails on any rank. Every rank stops at the same step (one
all_reduce every few steps). accelerate installs no signal handler (checked with
accelerate 1.x): trainguard is the one owner of SIGUSR1 and SIGTERM.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from trainguard.config import GuardConfig, config_from
from trainguard.guard import Guard


def accelerate_guard(accelerator: Any, config: GuardConfig | None = None, guard: Guard | None = None,
                     **settings: Any) -> Guard:
    """A started Guard that saves with `accelerator.save_state(dir)` on every rank and
    resumes with `accelerator.load_state(dir)`. Call `resume()` after `accelerator.prepare`
    (load_state fills the prepared objects) and before the first step. `guard`: a Guard
    without save/load functions started before importing torch and accelerate (seconds,
    during which a signal would otherwise end the process)."""
    if guard is not None and (config is not None or settings):
        raise ValueError("accelerate_guard: pass either guard= or settings, not both")
    if accelerator.project_configuration.automatic_checkpoint_naming:
        raise ValueError("Accelerator(project_config=ProjectConfiguration(automatic_checkpoint_naming="
                         "True)): save_state would ignore trainguard's directory; set it to False "
                         "(trainguard names, commits and prunes the checkpoints)")
    cfg = guard.config if guard is not None else config if config is not None else config_from(**settings)
    if cfg.checkpoint_dir is None:
        raise ValueError("trainguard checkpoint_dir is not set: pass checkpoint_dir=... or set "
                         "TRAINGUARD_CHECKPOINT_DIR (the batch script templates do)")

    def save(directory: Path) -> None:
        accelerator.save_state(str(directory))

    def load(directory: Path) -> None:
        accelerator.load_state(str(directory))

    # Every rank's save_state: model and optimizer on the main process, RNG states per rank.
    if guard is not None:
        guard.attach(save, load, save_all_ranks=True).start()
    else:
        guard = Guard(cfg, save=save, load=load, save_all_ranks=True).start()
    _observe_backward(accelerator, guard)
    return guard


def _observe_backward(accelerator: Any, guard: Guard) -> None:
    """Training health without user code: every `accelerator.backward(loss)` hands the loss
    to `guard.observe` (a detached reference, read about once a second: no device sync per
    step). Batch sizes come from `guard.data(loader)` or `guard.observe(samples=...)`."""
    if guard.health is None:
        return
    backward = accelerator.backward
    observe = guard.observe

    def observed(loss: Any, **kwargs: Any) -> Any:
        observe(loss=loss.detach() if hasattr(loss, "detach") else loss)
        return backward(loss, **kwargs)
    accelerator.backward = observed
