"""The check contract, shared by built-in checks and drop-ins.

A result is a status (OK/WARNING/CRITICAL/UNKNOWN, the Nagios exit codes 0-3), a one-line
summary, optional detail lines and metrics. Drop-ins speak the monitoring-plugins
convention: the exit code is the status, the first line is the summary, and performance
data follows a `|`.

Every text field of a result is made safe where the result is built (the seam every
check, drop-in, refusal and self-alert passes): a lone surrogate (a byte that was not
UTF-8, from a file name, argv or JSON) becomes `\\xNN` (`watchdogs.textsafe.from_os`), so
no write to the database, a log or a channel can fail on it; and the one-line texts
(summary, details, context, a notice) have their control characters and line breaks
escaped, so a reason, a job name or a drop-in's output cannot forge a line anywhere they
are shown. Keys (item ids, fingerprints) only lose their surrogates, so every key an
existing alert has stays as it was. Plain ASCII, nearly all text, is kept as it is, the
same object: nothing is copied.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from watchdogs.humanize import exit_status
from watchdogs.textsafe import from_os, visible


def storable(obj: object, *names: str, lines: bool = False) -> None:
    """In a frozen dataclass's `__post_init__`: each named field (a str, a tuple of str, or a
    mapping of str to str) with its lone surrogates made `\\xNN`; with `lines`, also its
    control characters and line breaks escaped (textsafe.visible), so a text that is one
    line by contract (a summary, a detail line, a reason) cannot forge a second one in any
    output. Clean fields, nearly all, are left as they are: the same object."""
    clean_text = _one_line if lines else from_os
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, str):
            clean: object = clean_text(value)
        elif isinstance(value, tuple):
            clean = value if all(_is_clean(v, lines) for v in value) else \
                tuple(clean_text(v) if isinstance(v, str) else v for v in value)
        elif isinstance(value, Mapping):
            clean = value if all(_is_clean(k, lines) and _is_clean(v, lines) for k, v in value.items()) else \
                {clean_text(str(k)): clean_text(v) if isinstance(v, str) else v for k, v in value.items()}
        else:
            continue
        if clean is not value:
            object.__setattr__(obj, name, clean)


def _one_line(text: str) -> str:
    """Surrogates and control characters (line breaks too) escaped; not bounded (the
    channels bound what they send)."""
    if text.isascii() and text.isprintable():  # the fast path: plain ASCII, nothing to do
        return text
    return visible(text, newlines=False)


def _is_clean(value: object, lines: bool) -> bool:
    if not isinstance(value, str) or (value.isascii() and (not lines or value.isprintable())):
        return True
    return (_one_line if lines else from_os)(value) is value


class Status(enum.IntEnum):
    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3

    @classmethod
    def from_exit_code(cls, code: int) -> Status:
        """Any exit code outside 0-3 (a crash, a signal) is UNKNOWN."""
        return cls(code) if code in (0, 1, 2, 3) else cls.UNKNOWN

    @property
    def severity(self) -> int:
        """Order for "worst of": UNKNOWN sits between WARNING and CRITICAL."""
        return _MILDEST_FIRST.index(self)


_MILDEST_FIRST = (Status.OK, Status.WARNING, Status.UNKNOWN, Status.CRITICAL)
"""The one severity order; alert events (`watchdogs.alerts.events.severity_rank`) use it too."""


@dataclass(frozen=True)
class Metric:
    """One Nagios performance-data item: label=value[UOM];warn;crit;min;max."""

    label: str
    value: float
    unit: str = ""
    warn: str = ""
    crit: str = ""
    min: str = ""
    max: str = ""

    def __post_init__(self) -> None:
        storable(self, "label")

    def render(self) -> str:
        label = f"'{self.label}'" if re.search(r"[\s=']", self.label) else self.label
        tail = ";".join((self.warn, self.crit, self.min, self.max)).rstrip(";")
        value = f"{self.value:g}{self.unit}"
        return f"{label}={value};{tail}" if tail else f"{label}={value}"


@dataclass(frozen=True)
class Notice:
    """News that is not a problem (a job started, was requeued, ended): told once through
    the item's route (`notice`, else where warnings go), never opens or closes an alert."""

    summary: str
    details: tuple[str, ...] = ()
    kind: str = ""
    """What happened, for the reader's grouping: "started", "requeued", "ended"."""

    def __post_init__(self) -> None:
        storable(self, "summary", "details", lines=True)


@dataclass(frozen=True)
class JobLook:
    """What a `job` check saw of its training at this look, for the report's timeline
    (watchdogs.scheduler.story turns consecutive looks into queued/running/requeued/ended)."""

    phase: str
    """running, queued, paused or gone (watchdogs.slurmctl.jobstatus's kinds)."""
    job_id: str | None
    start: float | None = None
    """The running job's start: the same job with a new start was requeued in between."""
    reason: str = ""
    """Why it waits (squeue's reason) or, once gone, how it ended."""
    requeue_cause: str = ""
    """How accounting recorded the run that was requeued since the last look (PREEMPTED,
    NODE_FAIL, TIMEOUT...; "" when none): a preempted job waits with reason BeginTime like
    any requeue, only accounting tells preemption."""

    def __post_init__(self) -> None:
        storable(self, "job_id", "requeue_cause")
        storable(self, "reason", lines=True)  # Slurm's words, shown on the report's timeline


@dataclass(frozen=True)
class BadNode:
    name: str
    state: str
    reason: str

    def __post_init__(self) -> None:
        storable(self, "name", "state")
        storable(self, "reason", lines=True)  # an admin's free text (scontrol ... reason=)


@dataclass(frozen=True)
class NodesLook:
    """What a `nodes` check saw: every drained/down node, for the report's counts over time."""

    bad: tuple[BadNode, ...]
    total: int


@dataclass(frozen=True)
class CheckResult:
    """One look of a check or drop-in: status, summary, details, metrics, and what
    other modules act on (fingerprint, killed_by, notices)."""

    status: Status
    summary: str
    details: tuple[str, ...] = ()
    metrics: tuple[Metric, ...] = ()
    context: Mapping[str, str] = field(default_factory=dict)
    """Where it failed (job, partition, path, cluster...), for alert messages."""
    fingerprint: str = ""
    """What exactly is failing (the bad nodes, the job's state...): the same status with a new
    fingerprint is announced as "changed"."""
    killed_by: str | None = None
    """The signal that killed a drop-in the scheduler did not kill itself; while the scheduler
    is stopping, such a run counts as cut off (not run)."""
    notices: tuple[Notice, ...] = ()
    """Told once each, whatever the status (the check itself says each only once)."""
    look: JobLook | NodesLook | None = None
    """What a job or nodes check saw, kept for the report's history (never alerted on)."""

    def __post_init__(self) -> None:
        # The seam: whatever a check or drop-in was handed from outside is storable from here.
        storable(self, "summary", "details", "context", lines=True)
        storable(self, "fingerprint", "killed_by")  # keys: kept as they are unless unstorable

    def render(self) -> str:
        """Back to plugin output: "SUMMARY | perfdata" then detail lines."""
        line = self.summary
        if self.metrics:
            line += " | " + " ".join(m.render() for m in self.metrics)
        return "\n".join((line, *self.details))


def worst(statuses: list[Status] | tuple[Status, ...]) -> Status:
    return max(statuses, key=lambda s: s.severity, default=Status.OK)


_PERF_ITEM = re.compile(r"""('(?:[^']|'')+'|[^\s=']+)=(\S+)""")
_PERF_VALUE = re.compile(r"(-?[\d.]+(?:[eE][-+]?\d+)?)([a-zA-Z%/]*)")


def parse_perfdata(text: str) -> tuple[Metric, ...]:
    metrics = []
    for label, rest in _PERF_ITEM.findall(text):
        fields = (rest.split(";") + ["", "", "", ""])[:5]
        match = _PERF_VALUE.fullmatch(fields[0])
        if not match:
            continue
        metrics.append(Metric(label.strip("'").replace("''", "'"), float(match.group(1)),
                              match.group(2), *fields[1:5]))
    return tuple(metrics)


def parse_plugin_output(exit_code: int, output: str) -> CheckResult:
    """Nagios plugin output: first line is "summary | perfdata", more perfdata may follow
    a `|` on a later line (the long-output form)."""
    lines = output.rstrip("\n").splitlines() or [""]
    summary, _, perf = lines[0].partition("|")
    details, long_perf = [], []
    in_perf = False
    for line in lines[1:]:
        if in_perf:
            long_perf.append(line)
            continue
        text, bar, more = line.partition("|")
        details.append(text.rstrip())
        if bar:
            in_perf = True
            long_perf.append(more)
    metrics = parse_perfdata(" ".join([perf, *long_perf]))
    status = Status.from_exit_code(exit_code)
    said = exit_status(exit_code)
    if not summary.strip():
        summary = f"no output ({said})"
    elif status is Status.UNKNOWN and exit_code != 3:
        summary = f"{said}: {summary.strip()}"
    else:
        summary = summary.strip()
    return CheckResult(status, summary, tuple(d for d in details if d), metrics)
