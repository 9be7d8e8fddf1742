"""What a finished job left on disk, read in bounded child processes (a dead mount gives
"not readable", never a hung tick): the last lines of its stderr/stdout, trainguard's
heartbeat (the step it reached) and newest complete checkpoint (the step it saved).

Log lines are scrubbed of anything secret-shaped and capped, so the tail can go into an
alert (and stays short for SMS-sized channels)."""
from __future__ import annotations

import glob
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdogs import humanize
from watchdogs.fsprobe.bounded import FsError, probe
from watchdogs.slurmctl.ending import EndFacts, Progress
from watchdogs.slurmctl.hostlist import expand
from watchdogs.slurmctl.outputs import JobNames, log_paths, script_patterns, submit_line_patterns

if TYPE_CHECKING:
    from trainguard.heartbeat import Heartbeat
    from watchdogs.checks.context import TickContext
    from watchdogs.slurmctl.jobinfo import JobOutputs
    from watchdogs.slurmctl.sacct import AcctRecord
    from watchdogs.slurmctl.squeue import JobRow

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


def tail_logs(paths: Sequence[Path], count: int, timeout: float, owner: int | None = None
              ) -> LogTail | None:
    """The tail of the first of `paths` (stderr first) that exists and is not empty.
    `owner`: the job's uid: Slurm writes a job's log as its user, and the path comes from the
    job (its -o, its folder), so a file someone else owns (a link to another user's file) is
    named, never quoted into an alert."""
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
        if owner is not None and found.get("uid", owner) != owner:
            problems.append(f"{path}: not quoted: owned by uid {found['uid']}, not by the job's "
                            f"user (uid {owner})")
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


@dataclass(frozen=True)
class Where:
    """Where a finished job's stdout/stderr went (patterns), who said so, and, when nobody
    can, why and which key to set (never a guessed file)."""

    output: str | None
    error: str | None
    source: str
    unknown: str = ""
    default_ok: bool = False
    """No -o/-e was given (Slurm's record or the batch script shows it): slurm-%j.out."""


def where_logs(opts: Mapping[str, Any], check_name: str, job_id: str, seen: Mapping[str, Any] | None,
               record: AcctRecord | None, timeout: float) -> Where:
    """The patterns of `job_id`'s logs, from the most certain source (watchdogs.slurmctl.outputs):
    the check's keys, Slurm's paths seen while the job was known (`seen`), accounting's
    StdOut/StdErr, the recorded sbatch line, the resubmit script's #SBATCH lines."""
    output, error = opts.get("output"), opts.get("error")
    if output is not None or error is not None:
        return Where(output, error, "the check's output/error keys", default_ok=True)
    if seen and (seen.get("stdout") or seen.get("stderr")):
        return Where(seen.get("stdout") or None, seen.get("stderr") or None, "Slurm, while the job ran")
    if record is not None and (record.stdout or record.stderr):
        return Where(record.stdout or None, record.stderr or None, "accounting")
    line = submit_line_patterns(record.submit_line) if record is not None else None
    if line is not None and (line.output or line.error):
        return Where(line.output, line.error, "the sbatch command line")
    script = opts.get("resubmit")
    if script is not None:
        found = _script_patterns(script, timeout)
        if found is not None:
            return Where(*found, "the batch script", default_ok=True)
    if line is not None and line.wrap:
        return Where(None, None, "the sbatch command line", default_ok=True)
    said = ("its sbatch command line names no -o and its batch script was not read"
            if line is not None else "Slurm keeps no record of its output file here")
    return Where(None, None, "", unknown=(
        f"the output file of job {job_id} is not known ({said}, and the watchdog did not see the "
        f"job while the controller knew it); set output = \"<its sbatch -o pattern, e.g. "
        f"train-%j.out>\" in check \"{check_name}\""))


def job_log_tail(facts: EndFacts, where: Where, count: int, timeout: float) -> dict[str, Any] | None:
    """The tail of a finished job's stderr/stdout, from where `where` says, expanded for
    this job and taken from its working folder when relative."""
    if where.unknown:
        return {"path": "", "lines": [], "problem": where.unknown, "older": ""}
    first = expand(facts.nodelist)[0] if facts.nodelist else ""
    array = facts.job_id.split("_", 1) if "_" in facts.job_id else ["", ""]
    names = JobNames(facts.job_id, facts.name, facts.owner, first, array[0], array[1])
    paths = log_paths(where.output, where.error, names, facts.workdir, default=where.default_ok)
    found = tail_logs(paths, count, timeout, facts.uid)
    return None if found is None else {"path": found.path, "lines": list(found.lines),
                                       "problem": found.problem, "older": found.older}


# -- Slurm's paths, asked once per job while the controller knows it ----------------------

OUTPUTS_KEPT = 20


def tick_outputs(ctx: TickContext) -> tuple[frozenset[str], Mapping[str, JobOutputs]]:
    """The ids asked and Slurm's output paths of every new job of the tick's job checks, in
    ONE squeue call (shared like the tick's snapshot; none when no check has a new job).
    Each job is asked once in its life, so this is a call in the ticks that see new jobs."""
    def fetch() -> tuple[frozenset[str], Mapping[str, JobOutputs]]:
        from watchdogs.slurmctl.backoff import guarded
        from watchdogs.slurmctl.jobinfo import MAX_OUTPUT_IDS, run_outputs
        from watchdogs.slurmctl.snapshot import SLURM_TIMEOUT_S

        ids = ctx.wanted_ids("new_output_ids", ctx.checks)[:MAX_OUTPUT_IDS]
        if not ids:
            return frozenset(), {}
        found = guarded(ctx.store, "squeue", ctx.now.timestamp(),
                        lambda: run_outputs(ids, SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner))
        return frozenset(ids), found
    return ctx.shared("squeue-outputs", fetch)


def new_output_ids(memory: Mapping[str, Any], rows: Sequence[JobRow]) -> list[str]:
    """Running jobs whose output paths the check has not asked Slurm for yet. A queued job
    is asked once it runs: until then it writes no log, and one that never runs needs none."""
    kept = memory.get("outputs", {})
    return [r.raw_id for r in rows if r.running and r.raw_id not in kept]


def kept_outputs(memory: Mapping[str, Any], found: Mapping[str, JobOutputs], ids: Sequence[str]
                 ) -> dict[str, Any]:
    """The check's memory of output paths with `found` for `ids` added (the last OUTPUTS_KEPT
    jobs: a requeued job keeps its id, so its entry stays until newer jobs push it out)."""
    kept = dict(memory.get("outputs", {}))
    for job_id in ids:
        # Asked once: a job the answer leaves out (it ended meanwhile) is not asked again;
        # accounting and the sbatch line speak for it.
        paths = found.get(job_id)
        kept[job_id] = {"stdout": paths.stdout if paths else "", "stderr": paths.stderr if paths else ""}
    newest = sorted(kept, key=lambda i: int(i) if i.isdigit() else 0)[-OUTPUTS_KEPT:]
    return {i: kept[i] for i in newest}


def _script_patterns(script: Path, timeout: float) -> tuple[str | None, str | None] | None:
    """The script's #SBATCH output patterns; None when it cannot be read."""
    try:
        found = probe("newest", {"pattern": glob.escape(str(script)), "tail_bytes": 65536},
                      timeout, str(script))
    except FsError:
        return None
    return script_patterns(found["tail"]) if found else None
