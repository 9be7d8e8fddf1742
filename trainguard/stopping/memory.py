"""The memory watchdog: stop (save + requeue by default) before the OOM killer strikes.

Thresholds, each optional: this process's RSS above `max_rss`; the system's available
memory below `min_available`; free memory of the current CUDA device below `min_gpu_free`.
Cost: ~50 us for RSS and available memory together (psutil reads /proc; measured by
benchmarks/guard_overhead.py); `torch.cuda.mem_get_info` is one cudaMemGetInfo driver call
(typically tens of microseconds; it does not synchronise the stream, but it creates a CUDA
context if the process has none, so it is only called once CUDA is initialised). The guard
calls `check()` at most every `memory_every` seconds.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import psutil


def _mib(value: int) -> str:
    return f"{value / 2**20:.0f} MiB"


@dataclass(frozen=True)
class MemoryLimits:
    max_rss: int | None = None
    min_available: int | None = None
    min_gpu_free: int | None = None

    @property
    def enabled(self) -> bool:
        return any(v is not None for v in (self.max_rss, self.min_available, self.min_gpu_free))


def gpu_free_bytes() -> int | None:
    """Free bytes on the current CUDA device, or None without torch/CUDA. Never imports
    torch: a training that uses the GPU has imported it already."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    free, _total = torch.cuda.mem_get_info()
    return int(free)


class MemoryWatch:
    def __init__(self, limits: MemoryLimits) -> None:
        self.limits = limits
        self._process = psutil.Process()

    def check(self) -> str | None:
        """None when every threshold holds; else what crossed which threshold."""
        limits = self.limits
        if limits.max_rss is not None:
            rss = self._process.memory_info().rss
            if rss > limits.max_rss:
                return f"RSS {_mib(rss)} > max_rss {_mib(limits.max_rss)}"
        if limits.min_available is not None:
            available = psutil.virtual_memory().available
            if available < limits.min_available:
                return f"available memory {_mib(available)} < min_available {_mib(limits.min_available)}"
        if limits.min_gpu_free is not None:
            free = gpu_free_bytes()
            if free is not None and free < limits.min_gpu_free:
                return f"GPU free memory {_mib(free)} < min_gpu_free {_mib(limits.min_gpu_free)}"
        return None
