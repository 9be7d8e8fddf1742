"""trainguard: graceful save/stop/requeue for trainings on SLURM.

Importing it needs only the standard library and psutil; torch is imported lazily.
"""

__version__ = "0.1.0"
