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
from trainguard.causes import (
    DEFAULT_ACTIONS,
    END_AT_ONCE,
    EXIT_CANNOT_SAVE,
    EXIT_NO_PROGRESS,
    EXIT_REQUEUE,
    REPORT_ONLY,
    REQUEUE_WITHOUT_SAVE,
    SAVE_AND_CONTINUE,
    SAVE_AND_FAIL,
    SAVE_AND_REQUEUE,
    SAVE_AND_STOP,
    SAVE_IF_TIME_AND_END,
    Action,
    Cause,
    Decision,
    Policy,
    Save,
)
from trainguard.checkpoint import Checkpoint, CheckpointError, Checkpoints
from trainguard.config import GuardConfig, config_from
from trainguard.guard import Guard
from trainguard.heartbeat import Heartbeat, read_heartbeats, write_heartbeat

__version__ = "0.1.0"
__all__ = [
    "DEFAULT_ACTIONS", "END_AT_ONCE", "EXIT_CANNOT_SAVE", "EXIT_NO_PROGRESS", "EXIT_REQUEUE",
    "REPORT_ONLY", "REQUEUE_WITHOUT_SAVE", "SAVE_AND_CONTINUE",
    "SAVE_AND_FAIL", "SAVE_AND_REQUEUE", "SAVE_AND_STOP", "SAVE_IF_TIME_AND_END", "Action", "Cause",
    "Checkpoint", "CheckpointError", "Checkpoints", "Decision", "Guard", "GuardConfig", "Heartbeat",
    "Policy", "Save", "config_from", "read_heartbeats", "write_heartbeat",
]
