"""The Guard: a few lines in the training loop.

    guard = Guard(config_from(checkpoint_dir="ckpt"), save=save_to, load=load_from)
    guard.start()                        # handlers, kill switch; as early as possible
    with guard:                          # an exception -> save, exit 1, no requeue
        first = guard.resume()           # after init_process_group; loads the newest checkpoint
        for step in range(first, steps):
            train_step(step)
            guard.step(step)             # the poll point: usually ~0.2 us, returns
        guard.finish(step)

`guard.check(step)` is the detection alone (returns a Decision or None); `guard.act()`
carries a decision out (save, then continue or exit). The hot path of `check` is a clock
read, two comparisons and a few attribute stores; everything else (signal classification,
file polls, memory, EndTime re-reads, heartbeats) runs on the slow path, rate-limited.
"""
from __future__ import annotations

import logging
import math
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from trainguard import acting, lifecycle
from trainguard.causes import EXIT_NO_PROGRESS, Cause, Decision, decide
from trainguard.checkpoints.checkpoint import Checkpoint, Checkpoints
from trainguard.checkpoints.saving import Saver
from trainguard.config import GuardConfig
from trainguard.hangs.response import hang_watch
from trainguard.health.monitor import Health
from trainguard.heartbeat import HeartbeatWriter
from trainguard.recovery import precheck
from trainguard.slurm.job import JobEnv
from trainguard.stopping.agreement import Agreement
from trainguard.stopping.deadline import StepTimes
from trainguard.stopping.exits import ProcessExit
from trainguard.stopping.fast_exit import FastExit
from trainguard.stopping.forced_exit import ForcedExit
from trainguard.stopping.sensors import Sensors
from trainguard.stopping.signals import SignalFlag

log = logging.getLogger("trainguard")
Clock = Callable[[], float]
T = TypeVar("T")


def _ignore(loss: Any = None, samples: int = 0, tokens: int = 0) -> None:
    """guard.observe with health off."""


class Guard:
    def __init__(self, config: GuardConfig | None = None, save: Callable[[Path], None] | None = None,
                 load: Callable[[Path], None] | None = None, save_all_ranks: bool = False,
                 clock: Clock = time.monotonic, wall: Clock = time.time,
                 job: JobEnv | None = None) -> None:
        self.config = cfg = config or GuardConfig()
        self.job = job or JobEnv.from_env()
        self._load_fn = load
        self._clock, self._wall = clock, wall
        self.rank = self.job.procid or 0
        self.checkpoints = (Checkpoints(cfg.checkpoint_dir, cfg.keep, cfg.scratch_dir)
                            if cfg.checkpoint_dir is not None else None)
        self.saver = Saver(self.checkpoints, save, save_all_ranks, clock, cfg.save_estimate,
                           cfg.safety_margin)
        self.signals = SignalFlag(cfg.signals, clock)
        self.sensors = Sensors.from_config(cfg, self.signals, self.job)
        self.files, self.deadline = self.sensors.files, self.sensors.deadline
        self.agreement: Agreement | None = None
        self.heartbeat = (HeartbeatWriter(cfg.heartbeat_dir, self.rank, cfg.heartbeat_every,
                                          self.job.job_id) if cfg.heartbeat_dir is not None else None)
        self.fast_exit = FastExit()
        self.exits = ProcessExit(cfg.exit_file, self.fast_exit)
        self.forced = (ForcedExit(self.signals, self._forced_timeout, clock,
                                  lambda code: self.exits.write_code(code, self.rank))
                       if cfg.forced_exit != 0 else None)
        self.hang = hang_watch(self)   # the progress watchdog (trainguard.hangs.watch), None when off
        # Training health (trainguard.health.monitor): `observe` is the Health's own bound method,
        # so the hot path pays one call, not two.
        self.health = Health(cfg, self.rank, clock, wall) if cfg.health else None
        self.observe = self.health.observe if self.health is not None else _ignore
        if self.heartbeat is not None and self.health is not None:
            self.heartbeat.health = self.health
        self.resumed: Checkpoint | None = None
        self.save_failure = ""    # why the last save failed ("" when it worked)
        self.last_step = -1
        self._started = self._resumed_done = self._finished = self._exiting = False
        now = clock()
        self.steps = StepTimes(cfg.step_window, now)
        self._last_tick = now
        self._next_poll = math.inf
        self._next_sync = 0
        self.check = self._check_before_resume

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> Guard:
        """Install the signal handlers and check the kill switch. Call it as early as
        possible (before importing torch): a signal before this point kills the process."""
        if self._started:
            return self
        self._started = True
        self.signals.install()
        precheck.run(self.config, os.environ)     # a failing node: a suspect, the step ends
        if self.forced is not None:
            self.forced.start()
        lifecycle.write_pid(self.config.pid_file)
        if self.config.fast_exit:
            self.fast_exit.install()
        if self.files is not None and self.files.kill_switch_present():
            self._stop_at_start(Cause.KILL_SWITCH, f"kill switch {self.config.kill_switch} is present")
        return self

    def attach(self, save: Callable[[Path], None] | None = None, load: Callable[[Path], None] | None = None,
               save_all_ranks: bool = False) -> Guard:
        """Give a guard started early (before a framework's slow import: a signal meanwhile
        would end the process) the framework's save and load, before it resumes."""
        if self._resumed_done or self.saver.writer is not None or self._load_fn is not None:
            raise ValueError("Guard.attach: expected a guard without save/load functions that has "
                             "not resumed yet")
        self.saver.writer, self.saver.all_ranks, self._load_fn = save, save_all_ranks, load
        return self

    def resume(self) -> int:
        """Detect torch.distributed, load the newest loadable checkpoint, apply the requeue-loop
        protection and log the job-info line. Returns the first step to run."""
        return acting.resume(self)

    def _protect_against_requeue_loop(self) -> None:
        stuck = lifecycle.record_progress(self.config, self.job, self.last_step, self.rank)
        if self._anyone(stuck is not None):
            log.error(stuck or "trainguard: another rank found this job chain stuck; not requeuing")
            self._stop(EXIT_NO_PROGRESS, phase="done")

    def _anyone(self, flag: bool) -> bool:
        """This rank's flag, ORed across ranks under torch.distributed (one collective)."""
        return self.agreement.any(flag) if self.agreement else flag

    def _stop_at_start(self, cause: Cause, why: str) -> None:
        code = self.config.policy.action(cause).exit_code
        log.warning("trainguard: %s at start-up: not training (exit %d, no requeue)", why, code)
        self._stop(code, phase="done")

    def finish(self, step: int | None = None, phase: str = "done") -> None:
        """Cancel the forced-exit timer, restore the previous signal handlers (unless the guard
        is exiting the process: then they stay, ignoring repeats), write the last heartbeat and
        copy a scratch checkpoint to shared storage. Idempotent."""
        if self._finished:
            return
        self._finished = True
        if self.forced is not None:
            self.forced.cancel()
        if not self._exiting:
            self.signals.restore()
        self._beat(self.last_step if step is None else step, phase)
        if self.checkpoints is not None:
            self.checkpoints.sync_to_shared()

    def exit(self, code: int = 0) -> NoReturn:
        """End the process of a finished training: finish(), leave torch.distributed and exit
        with `code` through the guard's fast exit (atexit handlers registered after start()
        run; the interpreter's finalisation is skipped). That finalisation is where PyTorch's
        gloo worker threads may still be dropping the last collective's tensors, and one that
        needs Python then aborts the process ("terminate called without an active
        exception", SIGABRT) after the training finished: the launcher reports a failure."""
        self.finish()
        self.exits.leave(code, self.agreement)

    def __enter__(self) -> Guard:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        acting.leave(self, exc)

    # ---- the poll point ------------------------------------------------------------------
    def _check_before_resume(self, step: int) -> Decision | None:
        self.resume()
        return self.check(step)

    # The step-time bookkeeping below is written out in both poll points on purpose: this
    # is the training loop's hot path, and a shared helper would add a method call per step.
    def _check_local(self, step: int) -> Decision | None:
        now = self._clock()
        elapsed = now - self._last_tick
        self._last_tick = now
        if elapsed > self.steps.current:
            self.steps.current = elapsed
        self.last_step = step
        if now < self._next_poll and self.signals.pending == self.sensors.seen_signals:
            return None
        return self._decide(self._gather(now))

    def _check_distributed(self, step: int) -> Decision | None:
        now = self._clock()
        elapsed = now - self._last_tick
        self._last_tick = now
        if elapsed > self.steps.current:
            self.steps.current = elapsed
        self.last_step = step
        if step < self._next_sync:
            if now >= self._next_poll:
                self._gather(now)
            return None
        local = self._gather(now)
        agreement = self.agreement
        assert agreement is not None
        health = self.health
        mask = agreement.reduce(local, self.steps.recent_max, health.compute_us() if health else 0)
        if health is not None:
            health.peers(agreement.peers, step)       # the straggler, from agreed values
        self._next_sync = step + agreement.every      # the same on every rank
        if agreement.every != self.saver.margin.steps_before_decision:
            self.saver.wait_steps(agreement.every)
        return self._decide(mask)

    def _gather(self, now: float) -> int:
        if self.health is not None:
            self.sensors.mask |= self.health.poll(now, self.last_step)
        mask = self.sensors.gather(now, self._wall(), self.steps, self.saver.margin)
        heartbeat_at = math.inf
        if self.heartbeat is not None:
            self.heartbeat.beat(self.last_step, now)
            heartbeat_at = self.heartbeat.next_at
        self._next_poll = self.sensors.next_poll(now, heartbeat_at, self.steps)
        return mask

    def _decide(self, mask: int) -> Decision | None:
        return decide(mask, self.config.policy) if mask else None

    def step(self, step: int) -> Decision | None:
        """check() and, when it returns a decision, act() on it."""
        decision = self.check(step)
        if decision is not None:
            self.act(decision, step)
        return decision

    def phase(self, name: str) -> AbstractContextManager[None]:
        """Mark a phase in the heartbeat (e.g. "eval"), so a long evaluation is not a hang."""
        return acting.phase(self, name)

    def data(self, batches: Iterable[T]) -> Iterator[T]:
        """`for batch in guard.data(loader)`: the batches, each wait for one timed (the
        data-loader finding); two clock reads per batch."""
        return self.health.data(batches) if self.health is not None else iter(batches)

    # ---- acting --------------------------------------------------------------------------
    def act(self, decision: Decision, step: int) -> None:
        """Save if the policy says so; then continue (return) or stop (exit the process)."""
        acting.act(self, decision, step)

    def arm_forced_exit(self, decision: Decision) -> None:
        """Start the forced-exit timer for a stop (act() does it; an integration whose
        framework saves on its own calls it before that save). Covers a save or a teardown
        that hangs (a peer died mid-collective)."""
        if decision.action.stop and self.forced is not None:
            term = 1 << signal.SIGTERM if decision.cause is Cause.TERMINATE else 0
            self.forced.arm(self._forced_timeout(term)[0], decision.action.exit_code,
                            f"stopping ({decision.cause.label})")

    def save(self, step: int) -> Checkpoint | None:
        """Save and commit checkpoint `step` now (trainguard.acting.save says what a failure does)."""
        return acting.save(self, step)

    def record_save(self, step: int, elapsed: float, path: Path) -> None:
        """A save of `step` that a framework made itself (the HF Trainer's checkpoint-N)."""
        acting.record_save(self, step, elapsed, path)

    @property
    def save_time(self) -> float:
        """Seconds a save takes: measured once the guard has saved, else `save_estimate`."""
        return self.saver.save_time

    def _forced_timeout(self, pending_signals: int) -> tuple[float, int]:
        return lifecycle.forced_timeout(self.config, self.deadline.deadline - self._clock(),
                                        self.sensors.kill_wait, pending_signals)

    def _beat(self, step: int, phase: str) -> None:
        if self.hang is not None:
            self.hang.phase_changed(phase, self._clock())
        if self.heartbeat is not None:
            self.heartbeat.beat(step, self._clock(), phase)

    def _stop(self, code: int, step: int | None = None, phase: str = "stopping",
              requeue: bool = False, why: str = "") -> NoReturn:
        # The guard decided to exit: finish() keeps its signal handlers (a repeated USR1 or
        # TERM while finally blocks and atexit handlers run must not kill the process with
        # 138/143, or the batch script would not requeue a saved job).
        self._exiting = True
        self.sensors.log_late_signals()
        self.finish(step, phase)
        if requeue and self.rank == 0:
            self.exits.requeue(self.job.job_id)
        self.exits.exit(code, self.rank, self.agreement, why)
