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

The Guard is a facade: it owns the poll point (the step clock, the next poll and agreement
steps) and the order in which things happen; each concern is owned by an object with a
public face, which the Guard holds and calls:

    sensors        trainguard.stopping.sensors    signals, switch files, memory, the deadline
    agreement      trainguard.stopping.agreement  the ranks OR their causes (torch.distributed)
    saver          trainguard.checkpoints.saving  saves, resume, what is wrong with saving
    stopper        trainguard.stopping.stopper    finished/exiting, the forced exit, the way out
    hang           trainguard.hangs.watch         the progress watchdog (its thread)
    hang_response  trainguard.hangs.response      the hang's report and exit
    health         trainguard.health.monitor      is it learning
    heartbeat      trainguard.heartbeat           what the cluster-side checks read
"""
from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from trainguard.causes import EXIT_NO_PROGRESS, HEALTH_CAUSES, Cause, Decision, decide
from trainguard.checkpoints.checkpoint import Checkpoint, Checkpoints
from trainguard.checkpoints.failures import save_failed, without_save
from trainguard.checkpoints.saving import Saver
from trainguard.config import GuardConfig, hang_limits
from trainguard.hangs.response import HangResponse
from trainguard.hangs.watch import HangWatch
from trainguard.health.monitor import Health
from trainguard.heartbeat import HeartbeatWriter
from trainguard.recovery import precheck
from trainguard.recovery.requeue import requeue
from trainguard.slurm.job import JobEnv, log_job_line
from trainguard.stopping.agreement import Agreement
from trainguard.stopping.deadline import StepTimes
from trainguard.stopping.progress import record_start
from trainguard.stopping.sensors import Sensors
from trainguard.stopping.signals import SignalFlag
from trainguard.stopping.stopper import Stopper, log_stop_line

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
        self._clock, self._wall = clock, wall
        self.rank = self.job.procid or 0
        self.checkpoints = (Checkpoints(cfg.checkpoint_dir, cfg.keep, cfg.scratch_dir)
                            if cfg.checkpoint_dir is not None else None)
        self.heartbeat = (HeartbeatWriter(cfg.heartbeat_dir, self.rank, cfg.heartbeat_every,
                                          self.job.job_id) if cfg.heartbeat_dir is not None else None)
        self.saver = Saver(self.checkpoints, save, save_all_ranks, clock, cfg.save_estimate,
                           cfg.safety_margin, load, self.heartbeat)
        self.signals = SignalFlag(cfg.signals, clock)
        self.sensors = Sensors.from_config(cfg, self.signals, self.job)
        self.files, self.deadline = self.sensors.files, self.sensors.deadline
        self.agreement: Agreement | None = None
        self.stopper = Stopper(cfg, self.job.job_id, self.signals, self.sensors, clock, self.rank, requeue)
        # The progress watchdog (trainguard.hangs.watch) reads what the poll point stores.
        self.hang_response = (HangResponse(cfg, self.job, self.saver, self.rank, self.stopper.exits.requeue)
                              if cfg.hang_detect else None)
        self.hang = (HangWatch(hang_limits(cfg), lambda: (self.last_step, self._last_tick),
                               lambda: self.deadline.deadline, self.hang_response.respond, clock)
                     if self.hang_response is not None else None)
        # Training health (trainguard.health.monitor): `observe` is the Health's own bound method,
        # so the hot path pays one call, not two.
        self.health = Health(cfg, self.rank, clock, wall) if cfg.health else None
        self.observe = self.health.observe if self.health is not None else _ignore
        if self.heartbeat is not None and self.health is not None:
            self.heartbeat.health = self.health
        self.last_step = -1
        self._started = self._resumed = False
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
        self.stopper.start()
        if self.files is not None and self.files.kill_switch_present():
            self._stop_at_start(Cause.KILL_SWITCH, f"kill switch {self.config.kill_switch} is present")
        return self

    def attach(self, save: Callable[[Path], None] | None = None, load: Callable[[Path], None] | None = None,
               save_all_ranks: bool = False) -> Guard:
        """Give a guard started early (before a framework's slow import: a signal meanwhile
        would end the process) the framework's save and load, before it resumes."""
        if self._resumed or self.saver.writer is not None or self.saver.loader is not None:
            raise ValueError("Guard.attach: expected a guard without save/load functions that has "
                             "not resumed yet")
        self.saver.attach(save, load, save_all_ranks)
        return self

    def resume(self) -> int:
        """Detect torch.distributed, load the newest loadable checkpoint, apply the requeue-loop
        protection and log the job-info line. Returns the first step to run."""
        self.start()
        if self._resumed:
            return self.last_step + 1
        self._resumed = True
        self._join_ranks()
        if self._anyone(self.files is not None and self.files.kill_switch_present()):
            self._stop_at_start(Cause.KILL_SWITCH, f"kill switch {self.config.kill_switch} is present")
        self.saver.check_writable(self.rank, self._anyone)
        resumed = self.saver.resume(self.config.start_over, self.job)
        self.last_step = resumed.step if resumed else -1
        if resumed is not None and self.health is not None:
            self.health.saved(resumed.step, 0.0)
        self._protect_against_requeue_loop()
        self.sensors.start_deadline(self.config, self.job, self.agreement is None or self.rank == 0,
                                    self._clock(), self._wall())
        log_job_line(self.job, self.deadline.first, self.deadline.end_time, resumed,
                     self.agreement.world if self.agreement else 1)
        self._beat(self.last_step, "train")
        self._last_tick = self._next_poll = self._clock()   # the first check polls everything
        self._next_sync = self.last_step + self.config.sync_every   # the same on every rank
        self.check = self._check_distributed if self.agreement else self._check_local
        return self.last_step + 1

    def _join_ranks(self) -> None:
        """Under torch.distributed (2+ ranks): the agreement, and this process's real rank
        told to each owner; a single process keeps its rank."""
        agreement = self.agreement = Agreement.join(self.config.sync_every, self.config.sync_interval)
        if agreement is not None:
            self.rank = agreement.rank
            self.sensors.bind(agreement.rank)
            if self.heartbeat is not None:
                self.heartbeat.rank = agreement.rank
            self.saver.bind(agreement)
        self.stopper.bind(self.rank, agreement)
        if self.health is not None:
            self.health.bind(self.rank, agreement.nodes if agreement else [])
        if self.hang_response is not None:
            self.hang_response.bind(self.config, self.rank, agreement.world if agreement else 1)

    def _protect_against_requeue_loop(self) -> None:
        stuck = record_start(self.config.checkpoint_dir, self.job, self.last_step, self.rank,
                             self.config.max_restarts_without_progress)
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
        if not self.stopper.finish():
            return
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
        self.stopper.leave(code)

    def __enter__(self) -> Guard:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """`with guard:` ends: finish, or (an exception) save on this rank alone and exit 1."""
        if not isinstance(exc, Exception):
            self.finish()   # normal end, SystemExit (ours included), KeyboardInterrupt
            return
        if self.hang is not None:
            self.hang.leave_exit_to_response(exc)
        step, rank, distributed = self.last_step, self.rank, self.agreement is not None
        self._stop(self.stopper.after_exception(
            exc, step, lambda: self.saver.save_after_exception(step, rank, distributed)))

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
        return self._decide(self.gather(now))

    def _check_distributed(self, step: int) -> Decision | None:
        now = self._clock()
        elapsed = now - self._last_tick
        self._last_tick = now
        if elapsed > self.steps.current:
            self.steps.current = elapsed
        self.last_step = step
        if step < self._next_sync:
            if now >= self._next_poll:
                self.gather(now)
            return None
        local = self.gather(now)
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

    def gather(self, now: float) -> int:
        """The slow path, which the poll point runs when something is due: every source on its
        own cadence (health, sensors, heartbeat); this rank's causes, and the next poll time."""
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

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Mark a phase in the heartbeat (e.g. "eval"), so a long evaluation is not a hang."""
        self._beat(self.last_step, name)
        start = self._clock()
        try:
            yield
        finally:
            self._beat(self.last_step, "train")
            self._last_tick = end = self._clock()   # the phase is not a training step
            if self.health is not None:             # waiting for data, or not training
                self.health.phase_ended(name, end - start)

    def data(self, batches: Iterable[T]) -> Iterator[T]:
        """`for batch in guard.data(loader)`: the batches, each wait for one timed (the
        data-loader finding); two clock reads per batch."""
        return self.health.data(batches) if self.health is not None else iter(batches)

    # ---- acting --------------------------------------------------------------------------
    def act(self, decision: Decision, step: int) -> None:
        """Save if the policy says so; then continue (return) or stop (exit the process)."""
        saver = self.saver
        if decision.save and saver.problem:
            decision = without_save(decision, step, saver.problem)
        self.arm_forced_exit(decision)
        wanted = decision.save
        if wanted and self.save(step) is None and saver.failure:
            decision = save_failed(decision, step, saver.failure)
        action = decision.action
        if not wanted and action.stop and not saver.problem:
            log.warning("trainguard: not saving (%s)", "policy" if action.save.value == "never"
                        else "a save would not finish before SIGKILL")
        if Cause.SAVE_SWITCH in decision.causes and self.files is not None:
            self.files.consume_save_switch(remove=self.rank == 0)
        if decision.cause in HEALTH_CAUSES and self.health is not None:
            self.health.acted(decision, step)
        if not action.stop:
            # Warnings of training health are acted upon (logged) together.
            warned = sum(c.bit for c in decision.causes & HEALTH_CAUSES
                         if not self.config.policy.action(c).stop)
            self.sensors.clear(Cause.SAVE_SWITCH.bit | decision.cause.bit | warned)
            self.stopper.disarm()
            return
        why = log_stop_line(decision, step, saved=decision.save)
        self._stop(action.exit_code, step, requeue=action.requeue and self.config.self_requeue, why=why)

    def arm_forced_exit(self, decision: Decision) -> None:
        """Start the forced-exit timer for a stop (act() does it; an integration whose
        framework saves on its own calls it before that save). Covers a save or a teardown
        that hangs (a peer died mid-collective)."""
        self.stopper.arm(decision)

    def save(self, step: int) -> Checkpoint | None:
        """Save and commit checkpoint `step` now (also for the training's periodic saves, so
        the guard knows how long a save takes). Saves each step at most once. A save that
        fails (a full disk, a quota, the writer's own error) returns None and is said in
        the log and the heartbeat (`save_failure`); the training goes on, the last good
        checkpoint stays, and a stop then exits without requeue."""
        if not self.saver.due(step):
            return None
        health = self.health
        if health is not None and not health.finite_now(step):
            # The loss is NaN/Inf: the state is poisoned; the last good checkpoint stands.
            log.error("trainguard: not saving step %d: the loss is %s", step, health.record.nan_value)
            self.sensors.mask |= health.poll(self._clock(), step)
            self._next_poll = -math.inf    # the next poll point decides
            return None
        self._beat(step, "saving")
        saved = self.saver.save(step)
        if saved is None:
            self._beat(step, "train")
            return None
        ckpt, elapsed = saved
        self._saved(step, elapsed, ckpt.path)
        return ckpt

    def record_save(self, step: int, elapsed: float, path: Path) -> None:
        """A save of `step` that a framework made itself (the HF Trainer's checkpoint-N):
        it feeds the save-time estimate, the heartbeat and the log as the guard's own do."""
        self.saver.record(step, elapsed)
        self._saved(step, elapsed, path)

    def _saved(self, step: int, elapsed: float, path: Path) -> None:
        if self.health is not None:
            self.health.saved(step, self._wall(), elapsed)
        self._beat(step, "train")
        log.info("trainguard: saved step %d in %.3f s to %s", step, elapsed, path)
        self._last_tick = self._clock()   # the save is not a training step

    @property
    def save_time(self) -> float:
        """Seconds a save takes: measured once the guard has saved, else `save_estimate`."""
        return self.saver.save_time

    @property
    def save_failure(self) -> str:
        """Why the last save failed ("" when it worked)."""
        return self.saver.failure

    @property
    def resumed(self) -> Checkpoint | None:
        """The checkpoint the training resumed from (an integration whose framework loads on
        its own sets it before `resume()`)."""
        return self.saver.resumed

    @resumed.setter
    def resumed(self, checkpoint: Checkpoint | None) -> None:
        self.saver.resumed = checkpoint

    def _beat(self, step: int, phase: str) -> None:
        if self.hang is not None:
            self.hang.phase_changed(phase, self._clock())
        if self.heartbeat is not None:
            self.heartbeat.beat(step, self._clock(), phase)

    def _stop(self, code: int, step: int | None = None, phase: str = "stopping",
              requeue: bool = False, why: str = "") -> NoReturn:
        self.stopper.begin_exit()
        self.finish(step, phase)
        self.stopper.exit(code, requeue, why)
