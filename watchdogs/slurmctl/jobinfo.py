"""`scontrol -o show ...` one-liners (reservations, nodes): Key=Value pairs on one line; and
where a job's stdout/stderr go, asked once per new job while the controller knows it
(`run_outputs`: one squeue for every new job of a tick; the job check keeps the answer for
when the job is gone).

How a finished job ended comes from accounting instead (watchdogs.slurmctl.sacct, one
batched call per tick); the controller's memory of it from the tick's squeue snapshot."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from watchdogs.slurmctl.runner import SlurmRunner, listing

_PAIR = re.compile(r"(?:^|\s)([A-Za-z][\w/:]*)=(.*?)(?=\s+[A-Za-z][\w/:]*=|$)")


def parse_scontrol_oneliner(text: str) -> dict[str, str]:
    """Key=Value pairs of the first line; values may hold spaces."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return {m.group(1): m.group(2) for m in _PAIR.finditer(line)}


# -- where a job's stdout/stderr go, while the controller knows the job ---------------------

_SEP = "\x1f"
# squeue's -O fields (every release from 22.05 on); the suffix after ":" is printed after the
# value (no padding, no cut), so a path with spaces stays whole.
OUTPUT_FIELDS = ("JobID", "StdOut", "StdErr")
# One call names at most this many new jobs: a burst of submissions costs a few calls over
# a few ticks, not one huge command line.
MAX_OUTPUT_IDS = 50


@dataclass(frozen=True)
class JobOutputs:
    """Slurm's stdout/stderr for one job: absolute paths, or patterns (`%j`, `%x`, `%A_%a`)
    as 22.05's squeue shows them before the job writes."""

    stdout: str
    stderr: str


def outputs_argv(job_ids: Iterable[str]) -> list[str]:
    return ["squeue", "--noheader", f"--jobs={','.join(job_ids)}", "--states=all",
            "-O", ",".join(f"{f}:{_SEP}" for f in OUTPUT_FIELDS)]


def parse_outputs(text: str) -> dict[str, JobOutputs]:
    found = {}
    for line in text.splitlines():
        fields = line.split(_SEP)
        if len(fields) < len(OUTPUT_FIELDS) or not fields[0].strip():
            continue  # not ours: an answer without the paths only leaves them unknown
        job_id, stdout, stderr = (f.strip() for f in fields[:3])
        found[job_id] = JobOutputs(_path(stdout), _path(stderr))
    return found


def _path(value: str) -> str:
    return "" if value in ("", "(null)", "N/A") else value


def run_outputs(job_ids: Sequence[str], timeout: float, env: Mapping[str, str] | None,
                runner: SlurmRunner) -> dict[str, JobOutputs]:
    """The stdout/stderr of up to MAX_OUTPUT_IDS jobs, in ONE squeue call ({} for none)."""
    ids = list(dict.fromkeys(i for i in job_ids if i))[:MAX_OUTPUT_IDS]
    if not ids:
        return {}
    return parse_outputs(listing(runner(outputs_argv(ids), timeout=timeout, env=env)))
