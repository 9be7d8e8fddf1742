"""Where a finished job's stdout/stderr went: Slurm's filename patterns, expanded for one job.

sacct does not record the output paths (Slurm 22.05), and asking the controller costs a
call per job, so the pattern comes from what the user told us (the `job` check's `output`
and `error`), else from the `#SBATCH --output/--error` lines of the resubmit script, else
Slurm's default `slurm-%j.out` in the job's working directory.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

_TOKEN = re.compile(r"%(\d*)([%AaJjNnsuxt])")
_SBATCH = re.compile(r"^#SBATCH\s+(.*)$")
DEFAULT_OUTPUT = "slurm-%j.out"
DEFAULT_ARRAY_OUTPUT = "slurm-%A_%a.out"


@dataclass(frozen=True)
class JobNames:
    """What the patterns may refer to."""

    job_id: str
    name: str = ""
    user: str = ""
    first_node: str = ""
    array_job_id: str = ""
    array_task: str = ""


def expand(pattern: str, job: JobNames) -> str:
    """"logs/%x-%j.out" -> "logs/train-42.out"; "%%" is a literal "%"."""
    values = {"j": job.job_id, "J": job.job_id, "x": job.name, "u": job.user, "N": job.first_node,
              "n": "0", "t": "0", "s": "batch", "A": job.array_job_id or job.job_id,
              "a": job.array_task or "4294967294", "%": "%"}

    def one(match: re.Match[str]) -> str:
        width, key = match.groups()
        value = values[key]
        return value.zfill(int(width)) if width and value.isdigit() else value
    return _TOKEN.sub(one, pattern)


def script_patterns(text: str) -> tuple[str | None, str | None]:
    """(output, error) from a batch script's `#SBATCH` lines (before the first command)."""
    output = error = None
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            break
        match = _SBATCH.match(line)
        if not match:
            continue
        try:
            words = shlex.split(match.group(1), comments=True)
        except ValueError:
            continue
        for i, word in enumerate(words):
            flag, eq, value = word.partition("=")
            if not eq and i + 1 < len(words):
                value = words[i + 1]
            if flag in ("-o", "--output"):
                output = value
            elif flag in ("-e", "--error"):
                error = value
    return output, error


def log_paths(output: str | None, error: str | None, job: JobNames, workdir: str) -> list[Path]:
    """The files to tail, stderr first; relative patterns are taken from `workdir`."""
    default = DEFAULT_ARRAY_OUTPUT if job.array_task else DEFAULT_OUTPUT
    paths: list[Path] = []
    for pattern in (error, output or default):
        if pattern is None or pattern == "/dev/null":
            continue
        path = Path(expand(pattern, job))
        if not path.is_absolute():
            if not workdir:
                continue
            path = Path(workdir) / path
        if path not in paths:
            paths.append(path)
    return paths
