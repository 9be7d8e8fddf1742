"""trainguard's own errors (it imports nothing from the watchdogs service: it is what
people install into their training environments)."""
from __future__ import annotations


class SlurmError(Exception):
    """Slurm could not be asked (controller down, command missing, timeout, error reply)."""


class SlurmBusy(SlurmError):
    """The controller is overloaded or rate-limiting us, or did not answer in time."""


class SlurmInterrupted(SlurmError):
    """The client command was killed by a signal: Slurm signals every process of a job step,
    so the TERM of a preemption (or its forward by the batch script) kills our `scontrol`
    too. run_slurm asks a query again at once (the signal was for the training, not the
    question); a command that changes something is not repeated."""
