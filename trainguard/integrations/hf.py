"""trainguard for the Hugging Face Trainer: one callback and one resume helper.

    from trainguard.integrations.hf import TrainguardCallback, latest_checkpoint
    guard = TrainguardCallback()          # early: signals are caught from here on
    trainer = Trainer(model, args, train_dataset=data, callbacks=[guard])
    trainer.train(resume_from_checkpoint=latest_checkpoint(args.output_dir))

The guard decides (signals, switch files, EndTime, memory, agreement across ranks); the
Trainer acts with its own controls: `control.should_save` makes it write its own
`checkpoint-N` (model, optimizer, scheduler, RNG states, trainer state), and
`control.should_training_stop` ends the loop. After the Trainer's save the callback fsyncs
the directory, writes trainguard's completeness marker (COMPLETE.json), keeps the newest
`keep` (>= 2) complete checkpoints, and then exits with the decision's code (140: requeue).
`latest_checkpoint` returns the newest *complete* checkpoint, so a save cut off by SIGKILL
falls back to the previous one.

Training health: the loss is the Trainer's logged mean (every `logging_steps`; set
`logging_nan_inf_filter=False`, or the Trainer hides a NaN from its logs), the samples are
`per_device_train_batch_size x gradient_accumulation_steps` per step, tokens come from
`num_input_tokens_seen` when the Trainer counts them, and the data wait is the time from
one step's end to the next one's start (the Trainer fetches the batches in between).

Signals: transformers installs no signal handler by default. `enable_jit_checkpoint=True`
installs its own SIGTERM handler (a second save and no exit code); the callback refuses it
with a clear error, so that trainguard is the one owner of SIGUSR1 and SIGTERM.
"""
from __future__ import annotations

import logging
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from trainguard.causes import Decision
from trainguard.checkpoints.checkpoint import Checkpoint, CheckpointError, is_complete, mark_complete
from trainguard.config import GuardConfig, config_from
from trainguard.guard import Guard
from trainguard.stopping.agreement import initialized_dist

log = logging.getLogger("trainguard")
_NAME = re.compile(r"checkpoint-(\d+)")
TRAINER_STATE = "trainer_state.json"   # the Trainer writes it last-but-one in a checkpoint


def checkpoint_dirs(output_dir: str | Path) -> list[Checkpoint]:
    """Every `checkpoint-N` directory of the Trainer's output_dir, newest first."""
    root = Path(output_dir)
    found = [Checkpoint(p, int(m.group(1))) for p in (root.iterdir() if root.is_dir() else ())
             if (m := _NAME.fullmatch(p.name)) and p.is_dir()]
    return sorted(found, key=lambda c: c.step, reverse=True)


def _newest_complete(output_dir: str | Path) -> str | None:
    dirs = checkpoint_dirs(output_dir)
    complete = [c for c in dirs if is_complete(c.path)]
    if complete:
        skipped = [c.path.name for c in dirs if c.step > complete[0].step]
        if skipped:
            log.warning("trainguard: %s incomplete (cut off while saving?); resuming from %s",
                        ", ".join(skipped), complete[0].path)
        return str(complete[0].path)
    unmarked = [c.path.name for c in dirs if (c.path / TRAINER_STATE).is_file()]
    if unmarked:
        # Never start over silently next to checkpoints that look usable.
        raise CheckpointError(
            f"{output_dir} holds Trainer checkpoints without trainguard's completeness marker "
            f"({', '.join(unmarked)}): resume from one explicitly with "
            "trainer.train(resume_from_checkpoint=...) or move them away")
    return None


def latest_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete checkpoint-N in `output_dir` (for `resume_from_checkpoint`), or
    None to start fresh. Under torch.distributed every rank gets rank 0's answer."""
    dist = initialized_dist()
    if dist is None:
        return _newest_complete(output_dir)
    answer: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            answer[0] = ("ok", _newest_complete(output_dir))
        except CheckpointError as exc:
            answer[0] = ("error", str(exc))
    dist.broadcast_object_list(answer, src=0)
    kind, value = answer[0]
    if kind == "error":
        raise CheckpointError(value)
    return value


def prune(output_dir: str | Path, keep: int) -> None:
    """Keep the newest `keep` complete checkpoints; remove older ones and the leftovers of
    cut-off saves older than the newest complete one. Runs after each completed save, so
    the disk holds at most `keep` + 1 checkpoints."""
    dirs = checkpoint_dirs(output_dir)
    complete = [c for c in dirs if is_complete(c.path)]
    if not complete:
        return
    kept = {c.step for c in complete[:keep]}
    for ckpt in dirs:
        if ckpt.step not in kept and ckpt.step < complete[0].step:
            shutil.rmtree(ckpt.path, ignore_errors=True)


def _output_dir(args: TrainingArguments) -> Path:
    if args.output_dir is None:
        raise ValueError("TrainingArguments.output_dir is None: expected the directory of the "
                         "Trainer's checkpoints")
    return Path(args.output_dir)


class TrainguardCallback(TrainerCallback):
    """Maps trainguard's decisions onto the Trainer's controls. Settings as for `Guard`
    (keyword arguments and TRAINGUARD_* variables); `checkpoint_dir` is the Trainer's
    output_dir (taken from TrainingArguments when not set). `guard`: a Guard without save
    and load functions, started before importing transformers (which takes seconds, during
    which a signal would otherwise end the process)."""

    def __init__(self, config: GuardConfig | None = None, guard: Guard | None = None,
                 **settings: Any) -> None:
        if guard is not None and (config is not None or settings):
            raise ValueError("TrainguardCallback: pass either guard= or settings, not both")
        if guard is not None and guard.saver.enabled:
            raise ValueError("TrainguardCallback(guard=...): expected a Guard without save/load "
                             "functions (the Trainer saves and loads; a second save would follow)")
        # No save/load functions: the Trainer saves and loads.
        self.guard = (guard or Guard(config if config is not None else config_from(**settings))).start()
        self._pending: Decision | None = None
        self._save_started = 0.0
        self._step_end: float | None = None
        self._tokens_seen = 0

    # ---- set-up --------------------------------------------------------------------------
    def on_init_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        if getattr(args, "enable_jit_checkpoint", False):
            raise ValueError("TrainingArguments.enable_jit_checkpoint = True: the Trainer would install "
                             "its own SIGTERM handler and save a second time without an exit code; "
                             "set enable_jit_checkpoint=False (the default): trainguard saves on SIGTERM")
        limit = args.save_total_limit
        if limit is not None and limit < 2:
            raise ValueError(f"TrainingArguments.save_total_limit = {limit}: expected None or 2 or more "
                             "(the newest checkpoint may be the one that was cut off); trainguard prunes "
                             f"to keep = {self.guard.config.keep} itself")
        if self.guard.health is not None and args.logging_nan_inf_filter:
            log.warning("trainguard: TrainingArguments.logging_nan_inf_filter = True hides a NaN/Inf loss "
                        "from the logs trainguard reads; set it to False to have a NaN loss stop the run")
        output = _output_dir(args)
        cfg = self.guard.config
        if cfg.checkpoint_dir is None:
            # The requeue-loop record lives next to the checkpoints.
            self.guard.config = replace(cfg, checkpoint_dir=output)
        elif cfg.checkpoint_dir.resolve() != output.resolve():
            raise ValueError(f"trainguard checkpoint_dir = {cfg.checkpoint_dir} but TrainingArguments."
                             f"output_dir = {output}: expected the same directory (the Trainer saves "
                             "there; TRAINGUARD_CHECKPOINT_DIR sets trainguard's)")

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        for sig in sorted(set(self.guard.signals.signals) - set(self.guard.signals.owned())):
            log.error("trainguard: the handler of %s was replaced after trainguard installed its own; "
                      "a signal may be handled twice or not at all", sig.name)
        if state.global_step > 0:   # the Trainer has loaded a checkpoint (requeue-loop record)
            step = state.global_step
            self.guard.resumed = Checkpoint(_output_dir(args) / f"checkpoint-{step}", step)
        self.guard.resume()

    # ---- training health ---------------------------------------------------------------
    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                      **kwargs: Any) -> None:
        # The Trainer fetched this step's batches since the previous step ended: the data wait.
        health = self.guard.health
        if health is not None and self._step_end is not None:
            health.data_time += time.monotonic() - self._step_end

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, float] | None = None, **kwargs: Any) -> None:
        # The Trainer hands callbacks no per-step loss: its logged mean over logging_steps.
        if logs and "loss" in logs:
            self.guard.observe(loss=logs["loss"])

    # ---- the poll point ------------------------------------------------------------------
    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        tokens = state.num_input_tokens_seen or 0
        self.guard.observe(samples=args.per_device_train_batch_size * args.gradient_accumulation_steps,
                           tokens=tokens - self._tokens_seen)
        self._tokens_seen = tokens
        self._step_end = time.monotonic()
        decision = self.guard.check(state.global_step)
        if decision is None:
            if control.should_save:            # the Trainer's own periodic save
                self._before_save(args, state)
            return
        if not decision.save:
            self.guard.act(decision, state.global_step)   # nothing to save: continue or exit now
            return
        self._pending = decision
        control.should_save = True
        if decision.action.stop:
            self.guard.arm_forced_exit(decision)
            control.should_training_stop = True
        self._before_save(args, state)

    def on_epoch_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        if control.should_save:                # save_strategy="epoch": the same preparation
            self._before_save(args, state)

    def _before_save(self, args: TrainingArguments, state: TrainerState) -> None:
        # A directory of this step left by a cut-off save: the Trainer would write into it
        # and the marker would list its stale files.
        stale = _output_dir(args) / f"checkpoint-{state.global_step}"
        if self.guard.rank == 0 and stale.exists():
            shutil.rmtree(stale, ignore_errors=True)
        self._barrier()
        self._save_started = time.monotonic()

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        step = state.global_step
        path = _output_dir(args) / f"checkpoint-{step}"
        self._barrier()                        # every rank has written its RNG state
        if self.guard.rank == 0 and path.is_dir():
            mark_complete(path, step)
            prune(path.parent, self.guard.config.keep)
        self._barrier()                        # no rank exits before the marker is written
        self.guard.record_save(step, time.monotonic() - self._save_started, path)
        decision, self._pending = self._pending, None
        if decision is not None:
            self.guard.act(decision, step)     # continue, or exit with the decision's code

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        self.guard.finish(state.global_step)

    def _barrier(self) -> None:
        if self.guard.agreement is not None:
            self.guard.agreement.barrier()
