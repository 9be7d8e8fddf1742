"""The accelerator's utilization and memory through NVML (`pip install trainguard[nvml]`,
which brings nvidia-ml-py). Optional: without the package, without a driver, or in a job
that holds no GPU, the idle-accelerator check is off and `why_off` says why (logged once,
and written into the heartbeat). Never faked: untested where no GPU exists.
"""
from __future__ import annotations

import importlib
import os
from typing import Any


class Accelerator:
    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle

    @staticmethod
    def open(environ: dict[str, str] | None = None) -> tuple[Accelerator | None, str]:
        """(the device of this rank, "") or (None, why the check is off)."""
        env = dict(os.environ) if environ is None else environ
        visible = env.get("CUDA_VISIBLE_DEVICES", env.get("SLURM_JOB_GPUS", ""))
        if visible.strip() in ("", "-1", "NoDevFiles"):
            return None, "off: the job holds no GPU (CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS unset)"
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return None, "off: NVML not installed (pip install 'trainguard[nvml]')"
        try:
            nvml.nvmlInit()
            local = int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID", "0")))
            index = local % max(1, nvml.nvmlDeviceGetCount())
            return Accelerator(nvml, nvml.nvmlDeviceGetHandleByIndex(index)), ""
        except Exception as exc:  # noqa: BLE001 - NVMLError and its many subclasses: the check is off
            return None, f"off: NVML: {exc}"

    def read(self) -> tuple[float, int] | None:
        """(utilization %, memory used in bytes), None when NVML fails now."""
        try:
            util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
            memory = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
            return float(util.gpu), int(memory.used)
        except Exception:  # noqa: BLE001 - a failed reading is no finding
            return None
