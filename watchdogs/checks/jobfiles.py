"""What a finished job left on disk, read in bounded child processes (a dead mount gives
"not readable", never a hung tick): the last lines of its stderr/stdout, trainguard's
heartbeat (the step it reached) and newest complete checkpoint (the step it saved).

Log lines are scrubbed of anything secret-shaped and capped, so the tail can go into an
alert (and stays short for SMS-sized channels)."""
from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdogs import humanize
from watchdogs.fsprobe.bounded import FsError, probe
from watchdogs.slurmctl.ending import EndFacts, Progress
from watchdogs.slurmctl.hostlist import expand
from watchdogs.slurmctl.outputs import JobNames, log_paths, script_patterns

if TYPE_CHECKING:
    from trainguard.heartbeat import Heartbeat

MASK = "***"
# Who stopped a run that exited 0, by trainguard's cause label: the kill switch by default, a
# SIGTERM under a team's save-and-stop policy; any other cause is named by its label.
STOP_WORDS = {"kill_switch": "the kill switch", "terminate": "trainguard after a SIGTERM"}
LINE_CAP = 200
TAIL_BYTES = 16 * 1024
_SECRETS = (
    # key=value / key: value where the key names a secret (HF_TOKEN=..., "password": "...")
    # The key must END with the secret word: `tokens_per_sec=` and `num_tokens=` stay.
    (re.compile(r"(?i)\b([\w.-]*(?:token|secret|passw(?:or)?d|passphrase|api[_-]?key|"
                r"access[_-]?key|private[_-]?key|credentials?))(\"?\s*[:=]\s*\"?)([^\s\"',;]+)"),
     r"\1\2" + MASK),
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + MASK),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1" + MASK + "@"),
    (re.compile(r"\b(?:hf|sk|ghp|gho|ghs|glpat|xox[abprs]|wandb)[-_][A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+"), MASK),  # JWT
)


@dataclass(frozen=True)
class LogTail:
    path: str
    lines: tuple[str, ...]
    problem: str = ""
    """Why no lines: "not readable: ...", "empty"."""
    older: str = ""
    """What the tail leaves out, for the top of the alert: "41 older lines not shown", or
    "older lines not shown: the log is 3.2 MiB" when only its end was read; "": nothing."""


def scrub(line: str) -> str:
    for pattern, replacement in _SECRETS:
        line = pattern.sub(replacement, line)
    return line


def last_lines(text: str, count: int, cap: int = LINE_CAP) -> tuple[str, ...]:
    """The last `count` non-blank lines, scrubbed, each at most `cap` characters. The first
    line of a tail read from the middle of a file may be cut: it is dropped unless alone."""
    lines = [ln.rstrip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    picked = lines[-count:] if count > 0 else []
    return tuple(_cap(scrub(ln), cap) for ln in picked)


def _older(tail: str, size: int, shown: int) -> str:
    """What is left out above the `shown` last lines: counted when the whole file was read."""
    if size > TAIL_BYTES:
        return f"older lines not shown: the log is {humanize.size(size)}"
    cut = len(last_lines(tail, 10**9)) - shown
    return f"{cut} older line{'s' if cut != 1 else ''} not shown" if cut > 0 else ""


def _cap(line: str, cap: int) -> str:
    return line if len(line) <= cap else line[:cap - 1] + "…"


def tail_logs(paths: Sequence[Path], count: int, timeout: float) -> LogTail | None:
    """The tail of the first of `paths` (stderr first) that exists and is not empty."""
    problems = []
    for path in paths:
        try:
            found = probe("newest", {"pattern": glob.escape(str(path)), "tail_bytes": TAIL_BYTES,
                                     "special": "report"}, timeout, str(path))
        except FsError as exc:
            problems.append(f"{path}: not readable: {exc}")
            continue
        if found is None:
            problems.append(f"{path}: no such file")
            continue
        if "kind" in found:
            problems.append(f"{path} is {found['kind']}, not a log file")
            continue
        lines = last_lines(found["tail"], count)
        if lines:
            return LogTail(str(path), lines, older=_older(found["tail"], found["size"], len(lines)))
        problems.append(f"{path}: empty")
    if not problems:
        return None
    return LogTail(str(paths[0]) if paths else "", (), "; ".join(problems))


def progress(heartbeats: Path | None, checkpoints: Path | None, job_id: str,
             timeout: float, started: float | None = None) -> Progress:
    """The step trainguard's heartbeat reached in this job's run that started at `started`
    (Slurm's start of its last run; None: unknown), and the newest complete checkpoint (its
    step and when it was committed). Unreadable parts stay None. A requeued job keeps its id:
    an earlier run's records (a `hung` or `stopping` left by a rank that did not start again)
    do not explain this run's end."""
    from trainguard.heartbeat import Heartbeat, of_run

    step = saved_step = saved_at = stopped_by = None
    if heartbeats is not None:
        try:
            beats = probe("heartbeats", {"directory": str(heartbeats)}, timeout, str(heartbeats))
            mine = of_run([Heartbeat.from_dict(b) for b in beats], job_id, started=started)
            step = max((b.step for b in mine), default=None)
            stopped_by = _stopped_by(heartbeats, mine, job_id, timeout)
        except FsError:
            pass  # no step in the words; the ending itself is still explained
    if checkpoints is not None:
        pattern = f"{glob.escape(str(checkpoints))}/step-*/COMPLETE.json"
        try:
            found = probe("newest", {"pattern": pattern}, timeout, str(checkpoints))
        except FsError:
            found = None
        if found is not None:
            match = re.search(r"step-(\d+)", Path(found["path"]).parent.name)
            saved_step = int(match.group(1)) if match else None
            saved_at = float(found["mtime"])
    return Progress(step, saved_step, saved_at, stopped_by)


def _stopped_by(heartbeats: Path, beats: list[Heartbeat], job_id: str,
                timeout: float) -> str | None:
    """Who stopped the run, in words, when trainguard stopped it (its heartbeat says
    "stopping"; the exit file beside the folder names the cause); None when it finished."""
    from trainguard.heartbeat import STOPPED, exit_file_beside, run_end

    exit_file = exit_file_beside(heartbeats, job_id)
    try:
        found = probe("newest", {"pattern": glob.escape(str(exit_file)), "tail_bytes": 4096},
                      timeout, str(exit_file))
    except FsError:
        found = None  # the heartbeat alone still tells a stop from a finish
    end = run_end(beats, job_id, found["tail"] if found else None)
    if end is None or end.kind != STOPPED:
        return None
    if end.cause is None:
        return "trainguard"
    label = end.cause.label
    return STOP_WORDS.get(label, f"trainguard ({label.replace('_', ' ')})")


def job_log_tail(facts: EndFacts, output: str | None, error: str | None, script: Path | None,
                 count: int, timeout: float) -> dict[str, Any] | None:
    """The tail of a finished job's stderr/stdout: the patterns given, else the resubmit
    script's `#SBATCH --output/--error`, else Slurm's default, in the job's working folder."""
    if output is None and error is None and script is not None:
        output, error = _script_patterns(script, timeout)
    first = expand(facts.nodelist)[0] if facts.nodelist else ""
    array = facts.job_id.split("_", 1) if "_" in facts.job_id else ["", ""]
    names = JobNames(facts.job_id, facts.name, facts.owner, first, array[0], array[1])
    found = tail_logs(log_paths(output, error, names, facts.workdir), count, timeout)
    return None if found is None else {"path": found.path, "lines": list(found.lines),
                                       "problem": found.problem, "older": found.older}


def _script_patterns(script: Path, timeout: float) -> tuple[str | None, str | None]:
    try:
        found = probe("newest", {"pattern": glob.escape(str(script)), "tail_bytes": 65536},
                      timeout, str(script))
    except FsError:
        return None, None
    return script_patterns(found["tail"]) if found else (None, None)
