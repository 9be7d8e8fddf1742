"""trainguard: graceful save/stop/requeue for trainings on SLURM.

Importing it needs only the standard library and psutil; torch is imported lazily, and
only by a training that already uses torch.distributed or CUDA.

    from trainguard import Guard, config_from
    guard = Guard(config_from(checkpoint_dir="ckpt"), save=save_to, load=load_from).start()
    with guard:
        for step in range(guard.resume(), steps):
            train_step(step)
            guard.step(step)
        guard.finish(step)
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trainguard._version import __version__ as __version__  # the one version source

if TYPE_CHECKING:
    from trainguard.causes import (
        DEFAULT_ACTIONS,
        END_AT_ONCE,
        EXIT_CANNOT_SAVE,
        EXIT_NAN_LOSS,
        EXIT_NO_PROGRESS,
        EXIT_REQUEUE,
        REPORT_ONLY,
        REQUEUE_WITHOUT_SAVE,
        ROLLBACK,
        SAVE_AND_CONTINUE,
        SAVE_AND_FAIL,
        SAVE_AND_REQUEUE,
        SAVE_AND_STOP,
        SAVE_IF_TIME_AND_END,
        STOP_WITHOUT_SAVE,
        WARN,
        Action,
        Cause,
        Decision,
        Policy,
        Save,
    )
    from trainguard.checkpoints.checkpoint import Checkpoint, CheckpointError, Checkpoints
    from trainguard.config import GuardConfig, config_from
    from trainguard.guard import Guard
    from trainguard.heartbeat import Heartbeat, read_heartbeats, write_heartbeat

# Public name -> the submodule that defines it. The names are imported on first use (PEP 562),
# so a reader of one submodule (the cluster-side log_stale check reads trainguard.heartbeat)
# does not pay for the whole library: the guard, psutil and its many dataclasses.
_EXPORTS = {
    **dict.fromkeys(("DEFAULT_ACTIONS", "END_AT_ONCE", "EXIT_CANNOT_SAVE", "EXIT_NAN_LOSS",
                     "EXIT_NO_PROGRESS", "ROLLBACK", "STOP_WITHOUT_SAVE", "WARN",
                     "EXIT_REQUEUE", "REPORT_ONLY", "REQUEUE_WITHOUT_SAVE", "SAVE_AND_CONTINUE",
                     "SAVE_AND_FAIL", "SAVE_AND_REQUEUE", "SAVE_AND_STOP", "SAVE_IF_TIME_AND_END",
                     "Action", "Cause", "Decision", "Policy", "Save"), "causes"),
    **dict.fromkeys(("Checkpoint", "CheckpointError", "Checkpoints"), "checkpoints.checkpoint"),
    **dict.fromkeys(("GuardConfig", "config_from"), "config"),
    "Guard": "guard",
    **dict.fromkeys(("Heartbeat", "read_heartbeats", "write_heartbeat"), "heartbeat"),
}

__all__ = [
    "DEFAULT_ACTIONS", "END_AT_ONCE", "EXIT_CANNOT_SAVE", "EXIT_NAN_LOSS", "EXIT_NO_PROGRESS", "EXIT_REQUEUE",
    "ROLLBACK", "STOP_WITHOUT_SAVE", "WARN",
    "REPORT_ONLY", "REQUEUE_WITHOUT_SAVE", "SAVE_AND_CONTINUE",
    "SAVE_AND_FAIL", "SAVE_AND_REQUEUE", "SAVE_AND_STOP", "SAVE_IF_TIME_AND_END", "Action", "Cause",
    "Checkpoint", "CheckpointError", "Checkpoints", "Decision", "Guard", "GuardConfig", "Heartbeat",
    "Policy", "Save", "config_from", "read_heartbeats", "write_heartbeat",
]


if not TYPE_CHECKING:  # mypy sees the imports above, so a misspelt name stays an error
    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'trainguard' has no attribute {name!r}")
        value = getattr(importlib.import_module(f"trainguard.{module}"), name)
        globals()[name] = value  # later look-ups skip this function
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
