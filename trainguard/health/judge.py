"""The training-health judgements, as small pure pieces: the loss trend (spikes), the
throughput baseline, and the straggler among the ranks. Each takes readings and returns a
message with the numbers (or None); `trainguard.health.monitor` feeds them and keeps the findings.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


class LossTrend:
    """An exponentially weighted mean and deviation of the finite loss readings. A reading
    is a spike when it is `sigmas` deviations *and* `rise` (a fraction) above the mean;
    spikes do not move the trend, so one that never comes back stays a spike."""

    def __init__(self, sigmas: float, rise: float, readings: int, alpha: float = 0.05,
                 warmup: int = 20) -> None:
        self.sigmas, self.rise, self.readings = sigmas, rise, readings
        self.alpha, self.warmup = alpha, warmup
        self.mean = 0.0
        self.var = 0.0
        self.count = 0
        self.above = 0          # spike readings in a row
        self.first: tuple[int, float] | None = None   # (step, value) of the first of them

    def add(self, value: float, step: int) -> str | None:
        """The spike message once `readings` readings in a row are spikes, else None."""
        if self.count >= self.warmup and self.is_spike(value):
            self.above += 1
            self.first = self.first or (step, value)
            if self.above >= self.readings:
                return (f"loss spike: {value:.4g} at step {step:,} vs its trend {self.mean:.4g} "
                        f"± {math.sqrt(self.var):.2g} ({self.above} readings in a row above, "
                        f"since step {self.first[0]:,})")
            return None
        self.above, self.first = 0, None
        self.count += 1
        if self.count == 1:
            self.mean = value
            return None
        delta = value - self.mean
        self.mean += self.alpha * delta
        self.var = (1 - self.alpha) * (self.var + self.alpha * delta * delta)
        return None

    def is_spike(self, value: float) -> bool:
        excess = value - self.mean
        return excess > self.sigmas * math.sqrt(self.var) and excess > self.rise * abs(self.mean)


class Baseline:
    """This run's own throughput: the median of the first `windows` windows after warm-up.
    A drop is `below` windows in a row under `fraction` of it."""

    def __init__(self, warmup: float, windows: int, fraction: float, below: int) -> None:
        self.warmup, self.windows, self.fraction, self.below = warmup, windows, fraction, below
        self.samples: list[float] = []
        self.value = 0.0
        self.low = 0
        self.warm = False     # a window after warm-up has closed

    def add(self, rate: float, trained_for: float, unit: str) -> str | None:
        if trained_for < self.warmup:
            return None
        self.warm = True
        if rate <= 0 and not self.value:
            return None
        if not self.value:
            self.samples.append(rate)
            if len(self.samples) >= self.windows:
                self.value = statistics.median(self.samples)
            return None
        self.low = self.low + 1 if rate < self.fraction * self.value else 0
        if self.low >= self.below:
            return (f"throughput {rate / self.value:.0%} of this run's baseline ({rate:.4g} vs "
                    f"{self.value:.4g} {unit}/s) for {self.low} windows")
        return None


@dataclass(frozen=True)
class Straggler:
    rank: int
    ratio: float     # its compute per step / the other ranks' median
    value: float     # s of compute per step
    median: float


def straggler(compute: list[float], factor: float) -> Straggler | None:
    """The rank whose compute per step is at least `factor` x the median of the others'
    (every rank's value known and > 0), the worst one if several."""
    if len(compute) < 2 or min(compute) <= 0:
        return None
    worst: Straggler | None = None
    for rank, value in enumerate(compute):
        median = statistics.median(compute[:rank] + compute[rank + 1:])
        ratio = value / median
        if ratio >= factor and (worst is None or ratio > worst.ratio):
            worst = Straggler(rank, ratio, value, median)
    return worst


def straggler_text(found: Straggler, node: str) -> str:
    where = f" on {node}" if node else ""
    return (f"rank {found.rank}{where} takes {found.ratio:.1f}× the other ranks' median compute "
            f"per step ({found.value:.3g} s vs {found.median:.3g} s)")
