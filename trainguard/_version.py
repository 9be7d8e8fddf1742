"""The version of this repository's two distributions, trainguard and slurm-watchdogs: the one
place it is written. Both pyproject.toml files read it (hatchling's regex source, no import),
and watchdogs reports it too; CHANGELOG.md has a section per version."""

__version__ = "0.1.0"
