"""One consolidated `squeue` call with a fixed `-o` format, and its parser.

Why `-o` and not `--json`: on Slurm 22.05 `--json` ignores every filter (the whole queue
comes back), and on a queue of 1000 jobs it was measured ~9x slower with ~30x more output
than this format (benchmarks/squeue_tick.py). Fields are separated by ASCII unit separators and the job
name comes last, so names and reasons with spaces or `|` parse correctly.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from watchdogs.slurmctl.runner import SlurmRunner, listing, unparsed
from watchdogs.slurmctl.slurmtime import parse_elapsed, parse_timestamp

SEP = "\x1f"
# id, raw id, array job id, array task, state, user, partition, start (or expected start),
# end, submit, elapsed, node count, node list, dependency, reason, name (last: free text).
FIELDS = ("%i", "%A", "%F", "%K", "%T", "%u", "%P", "%S", "%e", "%V", "%M", "%D", "%N", "%E",
          "%r", "%j")
FORMAT = SEP.join(FIELDS)

RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "STAGE_OUT", "SIGNALING",
                            "RESIZING"})
QUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT"})
PAUSED_STATES = frozenset({"SUSPENDED", "STOPPED"})


@dataclass(frozen=True)
class JobRow:
    job_id: str
    """As squeue shows it: "88", "88_3", or "88_[4-10%1]" for the queued tasks of an array."""
    raw_id: str
    array_job_id: str
    array_task: str | None
    state: str
    user: str
    partition: str
    start: datetime | None
    """Actual start when running, Slurm's estimate (or None) when pending."""
    end: datetime | None
    submit: datetime | None
    elapsed: float
    num_nodes: int
    nodelist: str
    dependency: str | None
    reason: str
    name: str
    cluster: str | None = None

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def queued(self) -> bool:
        return self.state in QUEUED_STATES

    @property
    def finished(self) -> bool:
        return not (self.running or self.queued or self.state in PAUSED_STATES)


@dataclass(frozen=True)
class JobQuery:
    """What one squeue call asks for; None means "no filter" on that axis."""

    users: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None
    partitions: tuple[str, ...] | None = None
    clusters: tuple[str, ...] | None = None
    job_ids: tuple[str, ...] | None = None

    def argv(self) -> list[str]:
        # --states=all: finished jobs the controller still remembers (MinJobAge) come back
        # too, so "how did the last one end" costs no extra call.
        argv = ["squeue", "--noheader", "--states=all", "-o", FORMAT]
        for flag, values in (("--user", self.users), ("--name", self.names),
                             ("--partition", self.partitions), ("--clusters", self.clusters),
                             ("--jobs", self.job_ids)):
            # An empty set is no filter (asking for more rows is safe; "--name=" is not:
            # squeue would take it as a filter matching nothing, or refuse it).
            if values:
                argv.append(f"{flag}={','.join(sorted(values))}")
        return argv


def run_query(query: JobQuery, timeout: float, env: Mapping[str, str] | None,
              runner: SlurmRunner) -> tuple[JobRow, ...]:
    return parse_squeue(listing(runner(query.argv(), timeout=timeout, env=env)))


def parse_squeue(text: str) -> tuple[JobRow, ...]:
    """Rows of our fixed format. With --clusters, squeue puts "CLUSTER: name" before each
    cluster's rows. Any other line (a wrapper's warning, a cut-off row) raises SlurmDoubt:
    a listing with a line we cannot read is not a listing we may call complete."""
    rows, cluster = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("CLUSTER: "):
            cluster = line.split(":", 1)[1].strip() or None
            continue
        fields = line.split(SEP, len(FIELDS) - 1)
        if len(fields) != len(FIELDS) or not fields[1].strip() or not fields[4].strip():
            raise unparsed("squeue", line)
        rows.append(_row(fields, cluster))
    return tuple(rows)


def _row(f: list[str], cluster: str | None) -> JobRow:
    def opt(text: str) -> str | None:
        return None if text in ("", "N/A", "(null)") else text
    return JobRow(
        job_id=f[0], raw_id=f[1], array_job_id=f[2], array_task=opt(f[3]), state=f[4].split()[0],
        user=f[5], partition=f[6], start=parse_timestamp(f[7]), end=parse_timestamp(f[8]),
        submit=parse_timestamp(f[9]), elapsed=parse_elapsed(f[10]),
        num_nodes=int(f[11]) if f[11].isdigit() else 0, nodelist=f[12], dependency=opt(f[13]),
        reason=f[14], name=f[15], cluster=cluster)


def latest_finished(rows: Iterable[JobRow]) -> JobRow | None:
    """The instance that ended last (by end time, then by job id)."""
    def key(row: JobRow) -> tuple[float, int]:
        moment = row.end or row.submit
        return (moment.timestamp() if moment else 0.0, int(row.raw_id) if row.raw_id.isdigit() else 0)
    return max((r for r in rows if r.finished), key=key, default=None)
