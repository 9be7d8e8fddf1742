"""trainguard's own errors (it imports nothing from the watchdogs service: it is what
people install into their training environments)."""
from __future__ import annotations


class SlurmError(Exception):
    """Slurm could not be asked (controller down, command missing, timeout, error reply)."""


class SlurmBusy(SlurmError):
    """The controller is overloaded or rate-limiting us, or did not answer in time."""
