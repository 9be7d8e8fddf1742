"""One `sacct` call per tick for every job whose end a check must explain, and its parser.

The call names every job ID at once (`-j 12,13,40`), includes the steps (peak memory is a
step's MaxRSS) and earlier runs of requeued jobs (`--duplicates`), and asks for raw units
(`--noconvert`: bytes, seconds). A job that accounting does not know, or whose end it has
not recorded yet (slurmctld reports to slurmdbd a moment after the fact), is simply
missing or not `finished` in the answer: callers degrade to what squeue knows and say so.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from watchdogs.slurmctl.runner import SlurmRunner, listing, unparsed
from watchdogs.slurmctl.slurmtime import parse_elapsed, parse_timestamp

SEP = "\x1f"
# The job's name and working directory are free text: last, so a SEP-free split is safe.
FIELDS = ("JobID", "JobIDRaw", "State", "ExitCode", "Submit", "Start", "End", "ElapsedRaw",
          "TimelimitRaw", "NodeList", "NNodes", "NCPUS", "AllocTRES", "ReqMem", "MaxRSS",
          "TotalCPU", "UID", "User", "Reason", "JobName", "WorkDir")
# Where the job's stdout/stderr went, asked only of a release that offers them (`offered`):
# StdOut/StdErr from 24.11 (22.05 lacks them), SubmitLine (the sbatch command line) from
# 22.05. Free text, after FIELDS.
OPTIONAL = ("StdOut", "StdErr", "SubmitLine")
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                      "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED"})
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_MEM = re.compile(r"(\d+(?:\.\d+)?)([KMGTP]?)")
# Slurm's "no value" for a 64-bit memory field (NO_VAL64 printed in MiB).
_NO_VAL_MEM = 2**60


@dataclass(frozen=True)
class Step:
    name: str
    """"batch", "extern", "0", ..."""
    state: str
    exit_code: str
    max_rss: int | None


@dataclass(frozen=True)
class AcctRecord:
    """What accounting knows of one job's latest run (and how many runs it had)."""

    job_id: str
    """As sacct shows it: "5", or "88_3" for an array task."""
    raw_id: str
    state: str
    """The first word of State: "CANCELLED by 0" -> "CANCELLED"."""
    cancelled_by: int | None
    exit_code: str
    """Slurm's "code:signal"."""
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    elapsed: float
    time_limit: float | None
    """Seconds; None when unlimited or unknown."""
    nodelist: str
    nnodes: int
    ncpus: int
    mem_requested: int | None
    """Bytes for the whole job (AllocTRES mem=, else ReqMem)."""
    total_cpu: float
    uid: int | None
    user: str
    reason: str
    name: str
    workdir: str
    steps: tuple[Step, ...] = ()
    complete: bool = True
    """False for the placeholder slurmdbd makes when a step's record arrives before the
    job's own (name "allocation", no time limit, no working directory)."""
    earlier: tuple[str, ...] = ()
    """States of earlier runs of a requeued job, oldest first ("NODE_FAIL", "PREEMPTED")."""
    earlier_ends: tuple[datetime | None, ...] = ()
    """When each of those earlier runs ended (a requeue between two looks ended one)."""
    stdout: str = ""
    stderr: str = ""
    """Slurm's record of the job's output files (24.11 and later; "": not asked or none)."""
    submit_line: str = ""
    """The sbatch command line as accounting recorded it ("": not asked)."""

    @property
    def finished(self) -> bool:
        """Accounting has recorded the job and its end (it lags slurmctld by a moment)."""
        return self.complete and self.state in TERMINAL and self.end is not None

    @property
    def max_rss(self) -> int | None:
        """Peak resident memory of any step (one task on one node)."""
        values = [s.max_rss for s in self.steps if s.max_rss is not None]
        return max(values) if values else None

    @property
    def mem_per_node(self) -> int | None:
        if self.mem_requested is None:
            return None
        return self.mem_requested // max(1, self.nnodes)


def helpformat_argv() -> list[str]:
    return ["sacct", "--helpformat"]


def offered(helpformat: str) -> tuple[str, ...]:
    """The OPTIONAL fields this release's `sacct --helpformat` lists."""
    names = {word.lower() for word in helpformat.split()}
    return tuple(f for f in OPTIONAL if f.lower() in names)


def sacct_argv(job_ids: Iterable[str], extra: Sequence[str] = ()) -> list[str]:
    return ["sacct", "--noheader", "--parsable2", f"--delimiter={SEP}", "--noconvert",
            "--duplicates", "-j", ",".join(sorted(set(job_ids), key=_id_key)),
            "-o", ",".join((*FIELDS, *extra))]


def window_argv(since: datetime, names: Iterable[str] | None, users: Iterable[str] | None,
                extra: Sequence[str] = ()) -> list[str]:
    """Every job (of these names and users) active since `since`: runs that started and
    ended between two looks are in it, which `-j` with the ids a look saw cannot find.
    None: no filter on that axis (a regex name; users = "*")."""
    argv = ["sacct", "--noheader", "--parsable2", f"--delimiter={SEP}", "--noconvert",
            "--duplicates", f"--starttime={since.strftime('%Y-%m-%dT%H:%M:%S')}",
            "--endtime=now", "-o", ",".join((*FIELDS, *extra))]
    if names is not None:
        argv.append(f"--name={','.join(sorted(set(names)))}")
    argv.append("--allusers" if users is None else f"--user={','.join(sorted(set(users)))}")
    return argv


def run_sacct_window(since: datetime, names: Iterable[str] | None, users: Iterable[str] | None,
                     timeout: float, env: Mapping[str, str] | None,
                     runner: SlurmRunner, extra: Sequence[str] = ()) -> dict[str, AcctRecord]:
    return parse_sacct(listing(runner(window_argv(since, names, users, extra), timeout=timeout, env=env)),
                       extra)


def _id_key(job_id: str) -> tuple[int, str]:
    head = job_id.split("_")[0]
    return (int(head) if head.isdigit() else 0, job_id)


def run_sacct(job_ids: Iterable[str], timeout: float, env: Mapping[str, str] | None,
              runner: SlurmRunner, extra: Sequence[str] = ()) -> dict[str, AcctRecord]:
    """Records by raw job ID and by displayed ID; {} when asked about nothing."""
    ids = [i for i in job_ids if i]
    if not ids:
        return {}
    return parse_sacct(listing(runner(sacct_argv(ids, extra), timeout=timeout, env=env)), extra)


def parse_sacct(text: str, extra: Sequence[str] = ()) -> dict[str, AcctRecord]:
    """`extra`: the OPTIONAL fields asked after FIELDS, in the order asked."""
    width = len(FIELDS) + len(extra)
    records: dict[str, AcctRecord] = {}
    order: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = line.split(SEP, width - 1)
        if len(f) != width:
            # Accounting is the evidence a resubmit acts on: an answer with a line we
            # cannot read is no evidence (SlurmDoubt: the ending degrades and says why).
            raise unparsed("sacct", line)
        job_id, _, step = f[0].partition(".")
        if not step:
            record = _record(f, dict(zip(extra, f[len(FIELDS):], strict=True)))
            previous = records.get(record.raw_id)
            if previous is not None:  # --duplicates: a later run of a requeued job
                record = replace(record, earlier=(*previous.earlier, previous.state),
                                 earlier_ends=(*previous.earlier_ends, previous.end))
            records[record.raw_id] = record
            order.append(record.raw_id)
            continue
        raw = f[1].partition(".")[0]
        parent = records.get(raw) or next((r for r in records.values() if r.job_id == job_id), None)
        if parent is not None:
            records[parent.raw_id] = replace(parent, steps=(*parent.steps, _step(step, f)))
    out = dict(records)
    for record in records.values():
        out.setdefault(record.job_id, record)
    return out


def _record(f: list[str], more: Mapping[str, str]) -> AcctRecord:
    state, cancelled_by = _state(f[2])
    tres = dict(kv.split("=", 1) for kv in f[12].split(",") if "=" in kv)
    mem = memory(tres.get("mem", "")) or memory(f[13])
    return AcctRecord(
        job_id=f[0], raw_id=f[1], state=state, cancelled_by=cancelled_by, exit_code=f[3],
        submit=parse_timestamp(f[4]), start=parse_timestamp(f[5]), end=parse_timestamp(f[6]),
        elapsed=float(f[7]) if f[7].isdigit() else 0.0,
        time_limit=float(f[8]) * 60 if f[8].isdigit() else None,
        nodelist="" if f[9] in ("None assigned", "(null)") else f[9],
        nnodes=int(f[10]) if f[10].isdigit() else 0, ncpus=int(f[11]) if f[11].isdigit() else 0,
        mem_requested=mem, total_cpu=parse_elapsed(f[15]),
        uid=int(f[16]) if f[16].isdigit() else None, user=f[17],
        reason="" if f[18] in ("None", "") else f[18], name=f[19], workdir=f[20],
        complete=bool(f[8]), stdout=_path(more.get("StdOut", "")), stderr=_path(more.get("StdErr", "")),
        submit_line=more.get("SubmitLine", ""))


def _path(value: str) -> str:
    return "" if value in ("(null)", "None", "N/A") else value


def _step(name: str, f: list[str]) -> Step:
    return Step(name, _state(f[2])[0], f[3], memory(f[14]))


def _state(text: str) -> tuple[str, int | None]:
    """"CANCELLED by 1000" -> ("CANCELLED", 1000)."""
    words = text.split()
    state = words[0] if words else ""
    if len(words) == 3 and words[1] == "by" and words[2].isdigit():
        return state, int(words[2])
    return state, None


def memory(text: str) -> int | None:
    """"162254848" (bytes, --noconvert), "100M", "4G" -> bytes; None when absent."""
    match = _MEM.fullmatch(text.strip())
    if not match:
        return None
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    return None if value <= 0 or value >= _NO_VAL_MEM else value
