"""slurm-watchdogs: a cron-style watchdog service that lives in a self-perpetuating SLURM job."""

__version__ = "0.1.0"
DISTRIBUTION = "slurm-watchdogs"
