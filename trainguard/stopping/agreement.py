"""Agreement across ranks: every rank ORs its causes with one small `all_reduce(MAX)`.

MAX of 0/1 flags is OR; it is supported by every backend (NCCL has no bitwise reduction).
The guard calls `reduce` only at agreed steps, so the collective is entered at the same
steps on all ranks and they all decide, save and stop at the same step. It is never called
from a signal handler. The cadence: every `sync_every` steps at first; with a
`sync_interval`, each agreement also carries every rank's longest recent step (MAX), from
which all ranks compute the same next interval in steps (about `sync_interval` seconds).
torch is imported here only, and only when torch.distributed is already in use.
"""
from __future__ import annotations

import sys
from typing import Any

from trainguard.causes import MASK_LEN, flags_to_mask, mask_to_flags
from trainguard.heartbeat import node_name


def initialized_dist() -> Any | None:
    """`torch.distributed` if the training initialised a process group of 2+ ranks, else
    None. Never imports torch: a training that uses it has imported it already."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist if dist.get_world_size() > 1 else None


MAX_EVERY = 1000
_US = 1_000_000


def next_every(longest_step: float, interval: float, every: int) -> int:
    """Steps until the next agreement: `interval` seconds of the slowest rank's steps, or
    `every` unchanged without an interval. A pure function of agreed values."""
    if interval <= 0:
        return every
    return max(1, min(MAX_EVERY, int(interval / max(longest_step, 1e-6))))


class Agreement:
    @classmethod
    def join(cls, sync_every: int, sync_interval: float) -> Agreement | None:
        """The agreement under torch.distributed (2+ ranks); None for a single process."""
        dist = initialized_dist()
        return cls(dist, sync_every, sync_interval) if dist is not None else None

    def __init__(self, dist: Any, sync_every: int, sync_interval: float) -> None:
        import torch  # lazily: only a distributed training gets here

        self._dist = dist
        self._torch = torch
        self.every = sync_every
        self.interval = sync_interval
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        # NCCL reduces CUDA tensors only; gloo/mpi CPU tensors.
        device = (torch.device("cuda", torch.cuda.current_device())
                  if dist.get_backend() == "nccl" else torch.device("cpu"))
        # The same all_reduce also carries one slot per rank (each rank fills its own, MAX
        # gives everyone every rank's value): its compute per step, for the straggler.
        self._buffer = torch.zeros(MASK_LEN + 1 + self.world, dtype=torch.int64, device=device)
        self._one = torch.zeros(1, dtype=torch.int32, device=device)
        self.peers: list[int] = [0] * self.world
        # Every rank's node, once, so that a straggler is named with its node.
        nodes: list[object] = [None] * self.world
        dist.all_gather_object(nodes, node_name())
        self.nodes = [str(n) for n in nodes]

    def reduce(self, mask: int, longest_step: float, compute_us: int = 0) -> int:
        """The OR of every rank's mask (one all_reduce of MASK_LEN + 1 + world ints); also
        sets `every`, the same on all ranks, from the slowest rank's longest recent step, and
        `peers`, every rank's compute per step (us)."""
        slots = [0] * self.world
        slots[self.rank] = max(0, min(compute_us, 2**62))
        values = [*mask_to_flags(mask), min(int(longest_step * _US), 2**62), *slots]
        self._buffer.copy_(self._torch.tensor(values, dtype=self._torch.int64))
        self._dist.all_reduce(self._buffer, op=self._dist.ReduceOp.MAX)
        reduced = self._buffer.tolist()
        self.every = next_every(reduced[MASK_LEN] / _US, self.interval, self.every)
        self.peers = reduced[MASK_LEN + 1:]
        return flags_to_mask(reduced[:MASK_LEN])

    def any(self, flag: bool) -> bool:
        self._one.fill_(1 if flag else 0)
        self._dist.all_reduce(self._one, op=self._dist.ReduceOp.MAX)
        return bool(self._one.item())

    def all(self, flag: bool) -> bool:
        return not self.any(not flag)

    def barrier(self) -> None:
        self._dist.barrier()

    def leave(self) -> None:
        """torch.distributed's destroy_process_group (the process is exiting)."""
        self._dist.destroy_process_group()
