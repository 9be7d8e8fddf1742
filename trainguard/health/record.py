"""The training-health part of a heartbeat record: the contract between trainguard's
`Health` (writer) and the cluster-side `training` check and metrics (readers).

Nested under `"health"` in `rank-<R>.json`:

    {"loss": 2.31, "loss_step": 12300, "nan_step": -1, "steps_per_s": 3.1, ...,
     "findings": [{"kind": "straggler", "text": "rank 5 on node7 takes 1.9x ...", ...}]}

Every value is what this rank measured over its last window (or its last loss reading);
`findings` are what it currently finds wrong, each with the step and Unix time it was
first seen. Only the standard library: the watchdog imports this module.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Finding:
    kind: str        # a Cause label: nan_loss, loss_spike, throughput, straggler, data_bound, idle_gpu
    text: str        # what was found, with the numbers
    step: int        # the step at which it was first seen
    since: float     # Unix time it was first seen
    rank: int = -1   # the rank it names (a straggler), -1 for none
    node: str = ""   # that rank's node

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(str(data["kind"]), str(data["text"]), int(data.get("step", -1)),
                   float(data.get("since", 0.0)), int(data.get("rank", -1)), str(data.get("node", "")))


@dataclass(frozen=True)
class TrainingHealth:
    loss: float | None = None          # the last finite loss read (None: none read yet)
    loss_step: int = -1                # the step of that reading
    nan_step: int = -1                 # the first step read as NaN/Inf, -1: none
    nan_value: str = ""                # "nan", "inf" or "-inf"
    steps_per_s: float = 0.0           # over the last window's training time
    samples_per_s: float = 0.0
    tokens_per_s: float = 0.0
    unit: str = "steps"                # what the baseline counts: samples, tokens or steps
    baseline: float = 0.0              # unit per s after warm-up; 0: not measured yet
    step_time: float = 0.0             # s per step (wall, training time only)
    compute_time: float = 0.0          # s per step this rank was running or runnable
    data_share: float = 0.0            # share of training time spent waiting for data
    gpu_utilization: float | None = None   # % (NVML), None when not read
    gpu_memory: int | None = None          # bytes used on the device (NVML)
    accelerator: str = ""              # why the idle-accelerator check is off ("" when on)
    checkpoint_step: int = -1          # the last good checkpoint (saved or resumed)
    checkpoint_time: float = 0.0       # Unix time it was saved, 0: unknown
    action: str = ""                   # what the guard did about a finding ("stopped, not requeued")
    findings: tuple[Finding, ...] = ()

    @property
    def rate(self) -> float:
        """The current throughput in the baseline's unit."""
        return {"samples": self.samples_per_s, "tokens": self.tokens_per_s}.get(self.unit, self.steps_per_s)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["findings"] = [asdict(f) for f in self.findings]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingHealth:
        known = {f.name for f in fields(cls)} - {"findings"}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("loss", "gpu_utilization"):
            value = values.get(key)
            values[key] = None if value is None or not math.isfinite(float(value)) else float(value)
        found = tuple(Finding.from_dict(f) for f in data.get("findings", ()) if isinstance(f, dict))
        return cls(**values, findings=found)


def kinds(health: TrainingHealth | None) -> set[str]:
    return {f.kind for f in health.findings} if health is not None else set()
