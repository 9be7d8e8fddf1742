"""Where a finished job's stdout/stderr went: Slurm's filename patterns, expanded for one job.

What Slurm said is the truth; what the user told us comes first all the same (the `job`
check's `output` and `error`). Then, in order: Slurm's paths seen while the job was
known to the controller (squeue StdOut/StdErr, kept by the job check), accounting's record
of them (sacct StdOut/StdErr, 24.11 and later), the `-o`/`-e` of the sbatch command line
accounting recorded (SubmitLine, 22.05 on), the `#SBATCH --output/--error` lines of the
batch script. Slurm's default `slurm-%j.out` only when the record shows that none was
given; otherwise the path is unknown and the alert says which key to set, never a guessed
file (`Where.unknown`).
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
        found = _flags(words)
        output, error = found.get("output", output), found.get("error", error)
    return output, error


def _flags(words: list[str]) -> dict[str, str]:
    """{"output": ..., "error": ...} of `-o X`, `--output=X`, `-oX` among sbatch words."""
    found: dict[str, str] = {}
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if not eq and len(flag) > 2 and flag[:2] in ("-o", "-e") and flag[1] != "-":
            flag, value, eq = flag[:2], flag[2:], "="  # "-otrain-%j.out": sbatch takes it too
        if not eq:
            value = words[i + 1] if i + 1 < len(words) else ""
        if flag in ("-o", "--output") and value:
            found["output"] = value
        elif flag in ("-e", "--error") and value:
            found["error"] = value
    return found


# sbatch options that take no value: any other option without "=" takes the next word.
_NO_VALUE = frozenset({
    "--requeue", "--no-requeue", "--parsable", "-H", "--hold", "-W", "--wait", "--test-only",
    "-O", "--overcommit", "--contiguous", "--spread-job", "--use-min-nodes", "--ignore-pbs",
    "-k", "--no-kill", "-Q", "--quiet", "-v", "-vv", "-vvv", "--verbose", "--get-user-env",
    "-s", "--oversubscribe", "--exclusive", "--reboot", "--nice", "--kill-on-invalid-dep=yes",
})


def _glued(word: str) -> bool:
    """`-J name` may be written `-Jname`: a short option with its value glued on."""
    return len(word) > 2 and word[1] != "-"


@dataclass(frozen=True)
class SubmitLine:
    """What an sbatch command line (accounting's SubmitLine) says of the job's output."""

    output: str | None
    error: str | None
    wrap: bool
    """`--wrap`: no script, so no `#SBATCH` line can name another output."""


def submit_line_patterns(line: str) -> SubmitLine | None:
    """The `-o`/`-e` of a recorded `sbatch ...` line; None when it is not one. sbatch
    records its arguments joined by spaces, unquoted: a path with a space in it is cut at
    the space (said by the caller: the file is then not found, and named)."""
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    if not words or not words[0].endswith("sbatch"):
        return None
    options: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        if word == "--wrap" or word.startswith("--wrap=") or not word.startswith("-"):
            options.append(word)
            break  # the wrapped command, or the script and its arguments: never options
        options.append(word)
        if "=" not in word and word not in _NO_VALUE and not _glued(word):
            options.append(next(rest, ""))  # the option's value, even one not starting with "-"
    found = _flags(options)
    wrap = any(w == "--wrap" or w.startswith("--wrap=") for w in options)
    return SubmitLine(found.get("output"), found.get("error"), wrap)


def log_paths(output: str | None, error: str | None, job: JobNames, workdir: str,
              default: bool = True) -> list[Path]:
    """The files to tail, stderr first; relative patterns are taken from `workdir`.
    `default`: without an output pattern, Slurm's own default (it is known none was given)."""
    fallback = (DEFAULT_ARRAY_OUTPUT if job.array_task else DEFAULT_OUTPUT) if default else None
    paths: list[Path] = []
    for pattern in (error, output or fallback):
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
