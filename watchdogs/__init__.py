"""slurm-watchdogs: a cron-style watchdog service that lives in a self-perpetuating SLURM job."""
from __future__ import annotations

DISTRIBUTION = "slurm-watchdogs"


def __getattr__(name: str) -> str:
    # One version for the repository's two distributions, written in trainguard/_version.py
    # (slurm-watchdogs depends on trainguard, whose heartbeat format it reads). Looked up on
    # first use, so `watchdogs --help` and `status` do not import the trainguard package.
    if name == "__version__":
        from trainguard._version import __version__
        return __version__
    raise AttributeError(f"module 'watchdogs' has no attribute {name!r}")
