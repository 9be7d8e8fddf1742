"""The guard's slow path: turn signals, files, memory and the deadline into a cause mask.

Runs only when something is due (each source has its own rate limit on the monotonic
clock) or a signal is pending; the hot path never gets here. `gather(now, wall)` returns
the causes seen *on this rank*; the guard ORs them across ranks before deciding.
"""
from __future__ import annotations

import logging
import math
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from trainguard.causes import Cause
from trainguard.slurm.job import DEFAULT_KILL_WAIT_S, JobEnv, query_kill_wait
from trainguard.stopping.deadline import Deadline, Margin, StepTimes, slurm_query
from trainguard.stopping.memory import MemoryLimits, MemoryWatch
from trainguard.stopping.signals import SignalFlag
from trainguard.stopping.switches import FileWatch

if TYPE_CHECKING:  # the config is read, never built, here: no run-time import of the layer above
    from trainguard.config import GuardConfig

log = logging.getLogger("trainguard")
MAX_POLL_GAP = 1.0   # s: the slow path runs at least this often (keeps the margin fresh)
_USR = (signal.SIGUSR1, signal.SIGUSR2)


class Sensors:
    def __init__(self, signals: SignalFlag, files: FileWatch | None, file_every: float,
                 memory: MemoryWatch | None, memory_every: float, deadline: Deadline) -> None:
        self.signals = signals
        self.files = files
        self.file_every = file_every
        self.memory = memory
        self.memory_every = memory_every
        self.deadline = deadline
        self.kill_wait_query: Callable[[], float] | None = None   # set on the rank that asks
        self.kill_wait = DEFAULT_KILL_WAIT_S
        self.mask = 0                 # causes seen on this rank, not yet acted upon
        self.seen_signals = 0         # signal bits already classified
        self.stop_request: signal.Signals | None = None
        self.term_at: float | None = None
        self.stop_at = math.inf
        self.next_files = -math.inf
        self.next_memory = -math.inf
        self.memory_reason = ""

    @classmethod
    def from_config(cls, cfg: GuardConfig, signals: SignalFlag, job: JobEnv) -> Sensors:
        files = FileWatch(cfg.kill_switch, cfg.save_switch, cfg.stop_file, job.job_id, job.restart_count)
        limits = MemoryLimits(cfg.max_rss, cfg.min_available, cfg.min_gpu_free)
        return cls(signals, files if files.any else None, cfg.file_every,
                   MemoryWatch(limits) if limits.enabled else None, cfg.memory_every,
                   Deadline(None, cfg.endtime_every, cfg.warning_lead))

    def bind(self, rank: int) -> None:
        """Under torch.distributed: this process's rank among the agreeing ranks."""
        if rank != 0:
            # Rank 0 alone polls the shared files; the agreement tells the others. (Spares a
            # metadata server thousands of stats per second on a large run.)
            self.files = None

    def start_deadline(self, cfg: GuardConfig, job: JobEnv, asks_slurm: bool, now: float,
                       wall: float) -> None:
        # One rank asks the controller when the ranks agree anyway (`asks_slurm`): a 1000-rank
        # job must not send slurmctld 1000 requests per re-read.
        if cfg.use_slurm_endtime and job.job_id and asks_slurm:
            self.deadline.query = slurm_query(job.job_id)
            self.kill_wait_query = query_kill_wait
        self.deadline.start(now, wall, cfg.exit_after)

    # ---- classification ------------------------------------------------------------------
    def classify(self, sig: signal.Signals, now: float, wall: float) -> Cause:
        if sig in _USR:
            return self.deadline.classify_usr(wall)
        cause = self.deadline.classify_term(now, wall)
        if cause is Cause.TERMINATE and self.kill_wait_query is not None:
            self.kill_wait = self.kill_wait_query()
            self.kill_wait_query = None    # ask the controller once
        self.term_at = self.term_at if self.term_at is not None else now
        return cause

    def _new_signals(self, now: float, wall: float) -> int:
        pending = self.signals.pending
        fresh, self.seen_signals = pending & ~self.seen_signals, pending
        mask = 0
        for sig in signal.Signals:
            if fresh & (1 << sig):
                cause = self.classify(sig, now, wall)
                log.warning("trainguard: received %s -> %s", sig.name, cause.label)
                mask |= cause.bit
                if sig == signal.SIGTERM and self.signals.first_at is not None:
                    self.term_at = min(self.term_at or now, self.signals.first_at)
        return mask

    def log_late_signals(self) -> None:
        """At the exit: name the signals that came after the stop was decided. Which ranks of
        which nodes got a warning is what a reader of a multi-node run looks for; the stop
        itself is the agreed one, so they change nothing."""
        fresh = self.signals.pending & ~self.seen_signals
        self.seen_signals |= fresh
        for sig in signal.Signals:
            if fresh & (1 << sig):
                log.warning("trainguard: received %s after the stop was decided", sig.name)

    def _poll_files(self, now: float, wall: float) -> int:
        if self.files is None or now < self.next_files:
            return 0
        self.next_files = now + self.file_every
        state = self.files.poll()
        mask = state.mask
        if state.stop_signal is not None and self.stop_request is None:
            self.stop_request = state.stop_signal
            cause = self.classify(state.stop_signal, now, wall)
            log.warning("trainguard: stop-request file %s says %s -> %s", self.files.stop_file,
                        state.stop_signal.name, cause.label)
            mask |= cause.bit
        return mask

    def _poll_memory(self, now: float) -> int:
        if self.memory is None or now < self.next_memory:
            return 0
        self.next_memory = now + self.memory_every
        reason = self.memory.check()
        if reason and not self.memory_reason:
            self.memory_reason = reason
            log.warning("trainguard: memory watchdog: %s", reason)
        return Cause.MEMORY.bit if reason else 0

    def no_time_to_save(self, now: float, save_time: float | None) -> bool:
        """After a plain scancel: would a save finish before SIGKILL (KillWait)? Only a
        measured save time says no: a save cut off by SIGKILL costs nothing (the commit is
        atomic), so with no measurement yet the guard tries."""
        if self.term_at is None or save_time is None:
            return False
        return (now - self.term_at) + save_time + 1.0 > self.kill_wait

    # ---- the slow path -------------------------------------------------------------------
    def gather(self, now: float, wall: float, steps: StepTimes, margin: Margin) -> int:
        steps.roll(now)
        mask = self._new_signals(now, wall) if self.signals.pending != self.seen_signals else 0
        mask |= self._poll_files(now, wall) | self._poll_memory(now)
        self.deadline.maybe_refresh(now)
        self.deadline.take_latest(now, wall)
        self.stop_at = self.deadline.stop_at(steps.recent_max, margin)
        if now >= self.stop_at:
            mask |= self.deadline_bit(now)
        self.mask |= mask
        if self.mask & Cause.TERMINATE.bit and self.no_time_to_save(now, margin.measured_save):
            self.mask |= Cause.NO_TIME.bit
        return self.mask

    def deadline_bit(self, now: float) -> int:
        cause = self.deadline.deadline_cause()
        if not self.mask & cause.bit:
            log.warning("trainguard: %.0f s left before the job's end; stopping in time (%s)",
                        max(0.0, self.deadline.deadline - now), cause.label)
        return cause.bit

    def next_poll(self, now: float, heartbeat_at: float, steps: StepTimes) -> float:
        dues = [now + MAX_POLL_GAP, self.stop_at, heartbeat_at, self.deadline.next_refresh,
                steps.window_start + steps.window]
        if self.files is not None:
            dues.append(self.next_files)
        if self.memory is not None:
            dues.append(self.next_memory)
        return min(dues)

    def clear(self, causes: int) -> None:
        self.mask &= ~causes
