"""Saving and resuming, in one owner: the checkpoints, the caller's writer and loader, the
checkpoint resumed from, the step saved last, the measured save time and the deadline
margin built on it, and what is wrong with saving (a folder that takes no files, the last
save's failure), told to the log and to the cluster-side check through the heartbeat.

The Guard (periodic and stop saves, the margin its sensors read) and the exception path
(a save on one rank, its peers elsewhere) both go through this object, so "saves each step
at most once" and "the margin follows the measured save time" hold in one place.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from trainguard.causes import EXIT_CANNOT_SAVE
from trainguard.checkpoints.checkpoint import Checkpoint, Checkpoints
from trainguard.checkpoints.failures import why_save_failed
from trainguard.stopping.deadline import Margin

if TYPE_CHECKING:
    from trainguard.heartbeat import HeartbeatWriter
    from trainguard.slurm.job import JobEnv
    from trainguard.stopping.agreement import Agreement

log = logging.getLogger("trainguard")
Clock = Callable[[], float]
Writer = Callable[[Path], None]
Loader = Callable[[Path], None]


class Saver:
    def __init__(self, checkpoints: Checkpoints | None, writer: Writer | None, all_ranks: bool,
                 clock: Clock, save_estimate: float, safety: float, loader: Loader | None = None,
                 heartbeat: HeartbeatWriter | None = None) -> None:
        self.checkpoints = checkpoints
        self.writer = writer
        self.loader = loader
        self.all_ranks = all_ranks
        self.heartbeat = heartbeat    # where a problem is told to the cluster-side check
        self._clock = clock
        self.resumed: Checkpoint | None = None
        self.saved_step: int | None = None
        self.save_time = save_estimate
        self.margin = Margin(save_estimate, safety)
        self.problem = ""         # why a save cannot work, found at start ("" when it can)
        self.failure = ""         # why the last save failed ("" when it worked)

    @property
    def enabled(self) -> bool:
        return self.checkpoints is not None and self.writer is not None

    @property
    def newest_step(self) -> int:
        """The newest checkpoint's step from memory (-1: none), without a file system access."""
        saved = self.saved_step if self.saved_step is not None else -1
        return max(self.resumed.step if self.resumed is not None else -1, saved)

    def attach(self, writer: Writer | None, loader: Loader | None, all_ranks: bool) -> None:
        """A framework's writer and loader, given after the guard was made."""
        self.writer, self.loader, self.all_ranks = writer, loader, all_ranks

    def bind(self, agreement: Agreement) -> None:
        """Under torch.distributed: collective saves, and decisions `agreement.every` steps apart."""
        if self.checkpoints is not None:
            self.checkpoints.bind(agreement.rank, agreement.barrier, agreement.all)
        self.wait_steps(agreement.every)

    def due(self, step: int) -> bool:
        """A save of `step` would do something: saving is set up and `step` is not saved yet."""
        return self.enabled and self.saved_step != step

    def wait_steps(self, steps: int) -> None:
        """A distributed decision waits `steps` steps for the next agreement."""
        if steps != self.margin.steps_before_decision:
            self.margin = replace(self.margin, steps_before_decision=steps)

    # ---- saving --------------------------------------------------------------------------
    def save(self, step: int) -> tuple[Checkpoint, float] | None:
        """Write and commit `step` (collectively under torch.distributed); (checkpoint, seconds),
        or None when it failed (`failure` says why). The caller checks `due(step)` first."""
        assert self.checkpoints is not None and self.writer is not None
        start = self._clock()
        try:
            ckpt = self.checkpoints.save(step, self.writer, self.all_ranks)
        except Exception as exc:  # noqa: BLE001 - the writer may raise anything (torch: RuntimeError)
            self.failure = self._failed(step, exc)
            return None
        elapsed = self._clock() - start
        self.record(step, elapsed)
        self.failure = ""
        return ckpt, elapsed

    def record(self, step: int, elapsed: float) -> None:
        """`step` was saved in `elapsed` s (here, or by a framework's own save)."""
        self.saved_step = step
        # The newest timing, but a fast save after a slow one only lowers the estimate slowly.
        self.save_time = max(elapsed, 0.8 * self.save_time) if self.margin.measured else elapsed
        self.margin = Margin(self.save_time, self.margin.safety, self.margin.steps_before_decision, True)

    def _failed(self, step: int, exc: BaseException) -> str:
        """A save failed (ENOSPC, EDQUOT, EIO, or the writer's own error). Say why in words,
        remove the partial save (which also gives back its space; the last good checkpoint is
        untouched, a save commits by rename after its marker) and tell the cluster-side check
        through the heartbeat. Returns the why."""
        checkpoints = self.checkpoints
        why = why_save_failed(exc, checkpoints.save_root if checkpoints is not None else None)
        last = checkpoints.latest() if checkpoints is not None else None
        if checkpoints is not None:
            checkpoints.discard_partial(step)
        kept = (f"the last good checkpoint, step {last.step} ({last.path}), is kept" if last is not None
                else "there is no earlier checkpoint")
        if self.heartbeat is not None:
            self.heartbeat.problem = (f"cannot write into the checkpoint folder: saving step {step} "
                                      f"failed: {why}")
        log.error("trainguard: saving step %d failed: %s; %s", step, why, kept)
        return f"{why}; {kept}"

    def save_alone(self, step: int, rank: int, distributed: bool) -> Checkpoint | None:
        """After an exception in a single-process run: save the last completed step.
        Not in a distributed run: the ranks agreed on no step, and the exception may have struck
        inside a collective (a peer that died), so the state is mid-step (its RNG and data
        position already past `step`); resuming from it would not be bit-identical. The
        newest agreed checkpoint stays the newest."""
        if not self.due(step) or step < 0 or rank != 0 or distributed:
            return None
        assert self.checkpoints is not None and self.writer is not None
        ckpt = self.checkpoints.save(step, self.writer, all_ranks=False, collective=False)
        self.saved_step = step
        return ckpt

    def save_after_exception(self, step: int, rank: int, distributed: bool) -> None:
        """`save_alone`, said in the log; a failing save is logged, never raised (the
        training's own exception is the one to report)."""
        try:
            ckpt = self.save_alone(step, rank, distributed)
            if ckpt is not None:
                log.info("trainguard: saved step %d to %s after the exception", step, ckpt.path)
            elif distributed and rank == 0:
                log.info("trainguard: not saving after the exception: the ranks agreed on no step "
                         "(the newest agreed checkpoint is the one to resume from)")
        except Exception as save_exc:  # noqa: BLE001 - report the original exception, not the save's
            log.error("trainguard: saving after the exception failed: %s", save_exc)

    # ---- at start ------------------------------------------------------------------------
    def probe(self, writes: bool) -> str:
        """Find out now, not at the first save, whether the checkpoint folder takes files
        (`writes`: this rank writes into it). Sets and returns `problem`."""
        if not self.enabled or not writes:
            return self.problem
        assert self.checkpoints is not None
        root = self.checkpoints.save_root
        probe = root / f".trainguard-probe-{os.getpid()}"
        try:
            root.mkdir(parents=True, exist_ok=True)
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            self.problem = f"cannot write into the checkpoint folder {root}: {exc.strerror or exc}"
        return self.problem

    def check_writable(self, rank: int, anyone: Callable[[bool], bool]) -> None:
        """At start, not at the first save: a stop request must not find out then that no
        checkpoint can be written. `anyone` ORs a flag across ranks (so all ranks act alike);
        the heartbeat carries the problem to the cluster-side check."""
        problem = self.probe(writes=rank == 0 or self.all_ranks)
        if not anyone(bool(problem)):
            return
        self.problem = problem or "another rank cannot write into its checkpoint folder"
        log.warning("trainguard: %s; training anyway, but a stop request will end the training "
                    "without a checkpoint and without requeue (exit %d)", self.problem, EXIT_CANNOT_SAVE)
        if self.heartbeat is not None:
            self.heartbeat.problem = self.problem

    def resume(self, start_over: bool, job: JobEnv) -> Checkpoint | None:
        """Load the newest loadable checkpoint with the loader (when there is one); keeps a
        `resumed` set by an integration that loaded on its own. A fallback over damaged
        checkpoints, or a restart that found none, is told, never silent."""
        checkpoints = self.checkpoints
        if checkpoints is not None and self.loader is not None:
            self.resumed = checkpoints.resume(self.loader, start_over)
        if checkpoints is not None:   # also after an integration's own resume
            self._report_fallback(checkpoints)
            if self.resumed is None and self.loader is not None:
                self._report_fresh_restart(checkpoints, job)
        return self.resumed

    def _report_fallback(self, checkpoints: Checkpoints) -> None:
        # Told to the cluster-side check (the heartbeat's `problem`, for this run), not only
        # to the log.
        if checkpoints.fallback is not None and self.heartbeat is not None and not self.heartbeat.problem:
            self.heartbeat.problem = checkpoints.fallback.describe()

    def _report_fresh_restart(self, checkpoints: Checkpoints, job: JobEnv) -> None:
        # A requeued run (restart N > 0) that finds no checkpoint at all starts from step 0:
        # legitimate when the first run was stopped before its first save, but also what a
        # moved, renamed or unmounted checkpoint folder looks like.
        if job.restart_count <= 0:
            return
        root = checkpoints.root
        where = root if root.is_dir() else f"{root} (which does not exist)"
        of_job = f" of job {job.label}" if job.label else ""
        problem = (f"restart {job.restart_count}{of_job} found no checkpoint in "
                   f"{where}: starting from step 0; if an earlier run saved one, this is not its folder")
        log.warning("trainguard: %s", problem)
        if self.heartbeat is not None and not self.heartbeat.problem:
            self.heartbeat.problem = problem
