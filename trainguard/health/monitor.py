"""Is it learning? Cheap observations in the loop, judged on the guard's slow path.

    loss = train_step(batch)
    guard.observe(loss=loss, samples=len(batch))   # keeps a reference; no device sync
    guard.step(step)

The hot path (`observe`) stores a reference to the loss (a CUDA tensor stays on the device)
and adds the batch sizes to two integers. The guard's slow path, which runs at most every
MAX_POLL_GAP (1 s) and at a step boundary, reads the loss (`float()`: the one device sync,
at most once a second) and, once per `health_window` of training time, turns the counters
into rates and compares them. A reading is therefore at most ~1 s plus one step stale, and
it is the loss of the step last observed before the poll: a loss that is NaN in one step
and finite in the next can be missed (a NaN that reached the weights stays).

Findings, each a policy entry (trainguard.causes): NaN/Inf loss (default: stop without
saving, exit 5), loss spike, throughput drop, straggler, data-loader bound, idle accelerator
(the others warn). A finding is logged once when it appears, carried in every heartbeat
while it lasts, and sets its cause bit once (the guard decides and acts on it).
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from trainguard.causes import Cause, Decision
from trainguard.health.accel import Accelerator
from trainguard.health.judge import Baseline, LossTrend, straggler, straggler_text
from trainguard.health.record import Finding, TrainingHealth

if TYPE_CHECKING:  # the config is read, never built, here: no run-time import of the layer above
    from trainguard.config import GuardConfig

log = logging.getLogger("trainguard")
T = TypeVar("T")
Clock = Callable[[], float]


def runnable_seconds() -> float:
    """Seconds this thread has been running or waiting to run (on a runqueue, or throttled
    by a cgroup CPU quota): its compute demand in wall time, without the time it slept in a
    collective, on I/O or on a lock. Linux schedstat; elsewhere its CPU time."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            run, wait = f.read().split()[:2]
        return (int(run) + int(wait)) / 1e9
    except (OSError, ValueError):
        return time.thread_time()


class Health:
    def __init__(self, cfg: GuardConfig, rank: int, clock: Clock, wall: Clock = time.time) -> None:
        # --- written on the hot path ---
        self.loss: Any = None
        self.samples = 0
        self.tokens = 0
        self.data_time = 0.0          # s waiting for data (guard.data(), the data_loading phase)
        # --- the slow path ---
        self.cfg, self.rank, self._clock, self._wall = cfg, rank, clock, wall
        self.excluded = 0.0           # s not training: eval/saving phases, saves
        self.trend = LossTrend(cfg.spike_sigmas, cfg.spike_rise, cfg.spike_readings)
        self.baseline = Baseline(cfg.health_warmup, cfg.baseline_windows, cfg.throughput_fraction,
                                 cfg.throughput_windows)
        self.record = TrainingHealth()
        self.found: dict[Cause, Finding] = {}
        self.bits = 0                 # causes of findings not yet handed to the guard
        self.nodes: list[str] = []
        self._peers: tuple[int, ...] = ()
        self._straggler: tuple[int, int] = (-1, 0)   # (rank, readings in a row)
        self._idle = 0
        self._read_step = -1
        self._started = clock()
        self.accel, why_off = Accelerator.open()
        self.record = replace(self.record, accelerator=why_off)
        if why_off:
            log.info("trainguard: idle-accelerator check %s", why_off)
        self._open_window(clock(), -1)

    # ---- the hot path ----------------------------------------------------------------------
    def observe(self, loss: Any = None, samples: int = 0, tokens: int = 0) -> None:
        """Keep a reference to `loss` (a float or a tensor, read later) and count the batch."""
        if loss is not None:
            self.loss = loss
        self.samples += samples
        self.tokens += tokens

    def data(self, batches: Iterable[T]) -> Iterator[T]:
        """The batches of `batches`, timing each wait for the next one (the data-loader finding)."""
        it = iter(batches)
        clock = self._clock
        while True:
            start = clock()
            try:
                batch = next(it)
            except StopIteration:
                return
            self.data_time += clock() - start
            yield batch

    # ---- the slow path ---------------------------------------------------------------------
    def read_loss(self) -> float | None:
        loss = self.loss
        if loss is None:
            return None
        try:
            return float(loss)      # the device sync, here only
        except (TypeError, ValueError, RuntimeError):
            return None

    def finite_now(self, step: int) -> bool:
        """Before a save: read the loss now, so a poisoned state is not saved."""
        self._read(step)
        return self.record.nan_step < 0

    def poll(self, now: float, step: int) -> int:
        """Read the loss, close the window when due; the causes of new findings."""
        if step != self._read_step:
            self._read(step)
        if now - self._window[0] >= self.cfg.health_window:
            self._close_window(now, step)
        bits, self.bits = self.bits, 0
        return bits

    def _read(self, step: int) -> None:
        self._read_step = step
        value = self.read_loss()
        if value is None:
            return
        rec = self.record
        if not math.isfinite(value):
            if rec.nan_step < 0:
                self.record = replace(rec, nan_step=step, nan_value=str(value).lower())
                last = (f"last finite {rec.loss:.4g} at step {rec.loss_step:,}" if rec.loss is not None
                        else "no finite loss read before")
                self._find(Cause.NAN_LOSS, f"loss {str(value).lower()} at step {step:,} ({last})", step)
            return
        if rec.nan_step >= 0:   # finite again (a policy that warns): the NaN finding ends
            self.record = replace(rec, nan_step=-1, nan_value="")
            self._lose(Cause.NAN_LOSS)
        self.record = replace(self.record, loss=value, loss_step=step)
        spike = self.trend.add(value, step)
        self._judge(Cause.LOSS_SPIKE, spike, step)

    def _open_window(self, now: float, step: int) -> None:
        self._window = (now, step, self.samples, self.tokens, self.data_time, self.excluded,
                        runnable_seconds())

    def _close_window(self, now: float, step: int) -> None:
        start, first, samples, tokens, data, excluded, runnable = self._window
        self._open_window(now, step)
        trained = (now - start) - (self.excluded - excluded)
        steps = step - first
        if steps <= 0 or trained <= 0 or first < 0:
            return
        unit = "samples" if self.samples > samples else "tokens" if self.tokens > tokens else "steps"
        self.record = replace(
            self.record, steps_per_s=steps / trained, samples_per_s=(self.samples - samples) / trained,
            tokens_per_s=(self.tokens - tokens) / trained, unit=unit, step_time=trained / steps,
            compute_time=(runnable_seconds() - runnable) / steps,
            data_share=min(1.0, (self.data_time - data) / trained))
        rec = self.record
        drop = self.baseline.add(rec.rate, now - self._started, unit)
        self.record = replace(rec, baseline=self.baseline.value)
        self._judge(Cause.THROUGHPUT, drop, step)
        share = rec.data_share
        self._judge(Cause.DATA_BOUND, share >= self.cfg.data_share and
                    f"data loader: {share:.0%} of the training time spent waiting for data "
                    f"({share * rec.step_time:.3g} of {rec.step_time:.3g} s per step)", step)
        self._read_accelerator(step)

    def _read_accelerator(self, step: int) -> None:
        reading = self.accel.read() if self.accel is not None else None
        if reading is None:
            return
        util, memory = reading
        self.record = replace(self.record, gpu_utilization=util, gpu_memory=memory)
        self._idle = self._idle + 1 if util <= self.cfg.idle_utilization else 0
        self._judge(Cause.IDLE_GPU, self._idle >= self.cfg.idle_windows and
                    f"accelerator {util:.0f} % utilized for {self._idle} windows", step)

    # ---- across ranks (the agreement carries every rank's compute per step) ----------------
    def compute_us(self) -> int:
        """This rank's compute per step for the agreement; 0 (not judged) during warm-up,
        whose first steps differ between ranks for reasons that pass (rank 0 asks Slurm)."""
        return int(self.record.compute_time * 1e6) if self.baseline.warm else 0

    def peers(self, compute_us: list[int], step: int) -> None:
        """Every rank's latest compute per step, agreed: the same on every rank."""
        values = tuple(compute_us)
        if values == self._peers:
            return      # no rank closed a window since: not a new reading
        self._peers = values
        found = straggler([v / 1e6 for v in values], self.cfg.straggler_factor)
        rank, count = self._straggler
        count = count + 1 if found is not None and found.rank == rank else 1
        self._straggler = (found.rank if found else -1, count)
        if found is None:
            self._lose(Cause.STRAGGLER)
        elif count >= self.cfg.straggler_windows:
            node = self.nodes[found.rank] if found.rank < len(self.nodes) else ""
            self._judge(Cause.STRAGGLER, straggler_text(found, node), step, found.rank, node)

    # ---- findings --------------------------------------------------------------------------
    def _judge(self, cause: Cause, text: str | None | bool, step: int, rank: int = -1,
               node: str = "") -> None:
        if text:
            self._find(cause, str(text), step, rank, node)
        else:
            self._lose(cause)

    def _find(self, cause: Cause, text: str, step: int, rank: int = -1, node: str = "") -> None:
        old = self.found.get(cause)
        if old is not None and old.rank == rank:
            self.found[cause] = replace(old, text=text)
        else:
            self.found[cause] = Finding(cause.label, text, step, self._wall(), rank, node)
            self.bits |= cause.bit
            if cause is not Cause.STRAGGLER or self.rank == 0:   # every rank finds a straggler
                log.warning("trainguard: %s (rank %d, step %d)", text, self.rank, step)
        self.record = replace(self.record, findings=tuple(self.found.values()))

    def _lose(self, cause: Cause) -> None:
        if self.found.pop(cause, None) is not None:
            log.info("trainguard: %s: no longer found (rank %d)", cause.label, self.rank)
            self.record = replace(self.record, findings=tuple(self.found.values()))

    def acted(self, decision: Decision, step: int) -> None:
        """What the guard did about a finding, for the heartbeat (and the alert)."""
        action = decision.action
        if not action.stop:
            return
        what = ("rolled back: exit 140 without saving; requeued to resume from the last good checkpoint"
                if action.requeue else f"stopped after step {step:,}, not requeued (exit {action.exit_code})")
        self.record = replace(self.record, action=what)

    def saved(self, step: int, wall: float, took: float = 0.0) -> None:
        """Checkpoint `step` was saved (or resumed from) at `wall`; the save took `took` s,
        which are not training time."""
        self.record = replace(self.record, checkpoint_step=step, checkpoint_time=wall)
        self.excluded += took

    def bind(self, rank: int, nodes: list[str]) -> None:
        """This process's rank and every rank's node, once the ranks are known."""
        self.rank, self.nodes = rank, nodes

    def phase_ended(self, name: str, seconds: float) -> None:
        """A phase of `seconds` ended: waiting for data (`data_loading`), or not training."""
        if name == "data_loading":
            self.data_time += seconds
        else:
            self.excluded += seconds
