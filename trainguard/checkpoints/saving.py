"""Saving, in one owner: the checkpoints, the caller's writer, the step saved last, the
measured save time and the deadline margin built on it.

The Guard (periodic and stop saves, the margin its sensors read) and the exception path
(a save on one rank, its peers elsewhere) both go through this object, so "saves each step
at most once" and "the margin follows the measured save time" hold in one place.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from trainguard.checkpoints.checkpoint import Checkpoint, Checkpoints
from trainguard.stopping.deadline import Margin

Clock = Callable[[], float]
Writer = Callable[[Path], None]


class Saver:
    def __init__(self, checkpoints: Checkpoints | None, writer: Writer | None, all_ranks: bool,
                 clock: Clock, save_estimate: float, safety: float) -> None:
        self.checkpoints = checkpoints
        self.writer = writer
        self.all_ranks = all_ranks
        self._clock = clock
        self.saved_step: int | None = None
        self.save_time = save_estimate
        self.margin = Margin(save_estimate, safety)
        self.problem = ""         # why a save cannot work, found at start ("" when it can)

    @property
    def enabled(self) -> bool:
        return self.checkpoints is not None and self.writer is not None

    def due(self, step: int) -> bool:
        """A save of `step` would do something: saving is set up and `step` is not saved yet."""
        return self.enabled and self.saved_step != step

    def wait_steps(self, steps: int) -> None:
        """A distributed decision waits `steps` steps for the next agreement."""
        if steps != self.margin.steps_before_decision:
            self.margin = replace(self.margin, steps_before_decision=steps)

    def save(self, step: int) -> tuple[Checkpoint, float]:
        """Write and commit `step` (collectively under torch.distributed); (checkpoint, seconds).
        The caller checks `due(step)` first."""
        assert self.checkpoints is not None and self.writer is not None
        start = self._clock()
        ckpt = self.checkpoints.save(step, self.writer, self.all_ranks)
        elapsed = self._clock() - start
        self.record(step, elapsed)
        return ckpt, elapsed

    def record(self, step: int, elapsed: float) -> None:
        """`step` was saved in `elapsed` s (here, or by a framework's own save)."""
        self.saved_step = step
        # The newest timing, but a fast save after a slow one only lowers the estimate slowly.
        self.save_time = max(elapsed, 0.8 * self.save_time) if self.margin.measured else elapsed
        self.margin = Margin(self.save_time, self.margin.safety, self.margin.steps_before_decision, True)

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
