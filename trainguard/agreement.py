"""Agreement across ranks: every rank ORs its causes with one small `all_reduce(MAX)`.

MAX of 0/1 flags is OR; it is supported by every backend (NCCL has no bitwise reduction).
The guard calls `reduce_mask` only at steps where `step % sync_every == 0`, which every
rank computes identically, so the collective is entered at the same steps on all ranks
and they all decide, save and stop at the same step. It is never called from a signal
handler. torch is imported here only, and only when torch.distributed is already in use.
"""
from __future__ import annotations

import sys
from typing import Any

from trainguard.causes import MASK_LEN, flags_to_mask, mask_to_flags


def initialized_dist() -> Any | None:
    """`torch.distributed` if the training initialised a process group of 2+ ranks, else
    None. Never imports torch: a training that uses it has imported it already."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist if dist.get_world_size() > 1 else None


class Agreement:
    def __init__(self, dist: Any, sync_every: int) -> None:
        import torch  # lazily: only a distributed training gets here

        self._dist = dist
        self._torch = torch
        self.sync_every = sync_every
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        # NCCL reduces CUDA tensors only; gloo/mpi CPU tensors.
        device = (torch.device("cuda", torch.cuda.current_device())
                  if dist.get_backend() == "nccl" else torch.device("cpu"))
        self._buffer = torch.zeros(MASK_LEN, dtype=torch.int32, device=device)
        self._one = torch.zeros(1, dtype=torch.int32, device=device)

    def reduce_mask(self, mask: int) -> int:
        """The OR of every rank's mask (one all_reduce of MASK_LEN int32)."""
        buffer = self._buffer
        if mask:
            buffer.copy_(self._torch.tensor(mask_to_flags(mask), dtype=self._torch.int32))
        else:
            buffer.zero_()
        self._dist.all_reduce(buffer, op=self._dist.ReduceOp.MAX)
        return flags_to_mask(buffer.tolist())

    def any(self, flag: bool) -> bool:
        self._one.fill_(1 if flag else 0)
        self._dist.all_reduce(self._one, op=self._dist.ReduceOp.MAX)
        return bool(self._one.item())

    def all(self, flag: bool) -> bool:
        return not self.any(not flag)

    def barrier(self) -> None:
        self._dist.barrier()
