"""The alert domain types: what one tick has to tell people (`AlertEvent`), grouped per
channel into one message (`Batch`).

Both the alert lifecycle (`watchdogs.alerts`) and the channels (`notifiers`) use them, so this
module sits in the core layer: it imports nothing but `watchdogs.result` and
`watchdogs.textsafe` (no jinja2, no notifiers), and `watchdogs/alerts/__init__.py` imports
nothing at module level.
"""
from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from watchdogs.result import Status
from watchdogs.textsafe import one_line

CONTEXT_LIMIT = 500
"""Characters of one context value (a path, a job name) in a message."""

EventState = Literal["alert", "changed", "repeat", "resolved", "test", "notice"]
"""alert (new problem), changed (severity or what is broken changed), repeat (still failing),
resolved, test (`watchdogs notify-test`), or notice (news that is not a problem, such as a
job's lifecycle: said once, opens no alert)."""


def severity_rank(severity: str) -> float:
    """How bad an event's severity ("resolved", "test", "ok", "warning", "unknown", "critical")
    is, on `Status.severity`'s scale, the one order: a resolved event weighs as OK, a test
    message between OK and WARNING."""
    if severity == "resolved":
        return Status.OK.severity
    if severity == "notice":
        return Status.OK.severity + 0.25
    if severity == "test":
        return Status.OK.severity + 0.5
    return Status[severity.upper()].severity


@dataclass(frozen=True)
class AlertEvent:
    """One thing to tell people about one item (a check or a drop-in)."""

    item: str
    state: EventState
    status: Status
    """The reading behind it."""
    previous: Status
    """What was announced before (OK for a new alert)."""
    summary: str
    since: datetime
    at: datetime
    kind: str = "check"
    details: tuple[str, ...] = ()
    context: Mapping[str, str] = field(default_factory=dict)
    runbook: str | None = None
    note: str = ""
    log: str = ""
    """The run log of the run that raised it (drop-ins), or ""."""

    def __post_init__(self) -> None:
        """Text from outside (a drop-in's output and name, Slurm's answers) reaches mail,
        Slack, the logfile channel and webhooks only through an event: here each field
        becomes one bounded line with its control characters shown as escapes, so no
        channel can be handed an escape sequence, a forged line or a 50 MB field."""
        clean = object.__setattr__
        clean(self, "item", one_line(self.item, CONTEXT_LIMIT))
        clean(self, "summary", one_line(self.summary))
        clean(self, "details", tuple(one_line(d) for d in self.details))
        clean(self, "context", {one_line(str(k), 100): one_line(str(v), CONTEXT_LIMIT)
                                for k, v in self.context.items()})
        clean(self, "note", one_line(self.note))
        if self.runbook is not None:
            clean(self, "runbook", one_line(self.runbook, CONTEXT_LIMIT))

    @property
    def severity(self) -> str:
        if self.state in ("resolved", "notice"):
            return self.state
        return self.status.name.lower()

    @property
    def label(self) -> str:
        status, previous = self.status.name, self.previous.name
        return {"resolved": "RESOLVED", "test": "TEST", "notice": "NOTICE",
                "changed": f"{status} (was {previous})" if previous != status
                else f"{status} (changed)",
                "repeat": f"{status} (still failing)"}.get(self.state, status)

    @property
    def duration(self) -> timedelta:
        return max(self.at - self.since, timedelta(0))

    def as_dict(self) -> dict[str, Any]:
        return {"item": self.item, "kind": self.kind, "state": self.state, "status": self.status.name,
                "previous": self.previous.name, "severity": self.severity, "summary": self.summary,
                "details": list(self.details), "context": dict(self.context),
                "since": self.since.isoformat(), "at": self.at.isoformat(),
                "runbook": self.runbook, "note": self.note, "log": self.log}


@dataclass(frozen=True)
class Batch:
    """Everything one tick has to say on one channel: one message."""

    channel: str
    events: tuple[AlertEvent, ...]
    at: datetime
    cluster: str
    host: str
    key: str = ""
    cli: str = "watchdogs"
    """The command a reader types to act on it (`watchdogs --config PATH` unless the config
    is the one a shell finds by itself): see `cli_for`."""

    def __post_init__(self) -> None:
        """The cluster's name comes from the config or $SLURM_CLUSTER_NAME and reaches the
        subject and every logfile line: one bounded line too."""
        object.__setattr__(self, "cluster", one_line(self.cluster, CONTEXT_LIMIT))
        object.__setattr__(self, "host", one_line(self.host, CONTEXT_LIMIT))

    @property
    def problems(self) -> tuple[AlertEvent, ...]:
        return tuple(e for e in self.events if e.state not in ("resolved", "notice", "test"))

    @property
    def tests(self) -> tuple[AlertEvent, ...]:
        return tuple(e for e in self.events if e.state == "test")

    @property
    def notices(self) -> tuple[AlertEvent, ...]:
        return tuple(e for e in self.events if e.state == "notice")

    @property
    def resolved(self) -> tuple[AlertEvent, ...]:
        return tuple(e for e in self.events if e.state == "resolved")

    @property
    def severity(self) -> str:
        return max((e.severity for e in self.events), key=severity_rank, default="resolved")

    @property
    def headline(self) -> str:
        """"3 problems (2 CRITICAL, 1 WARNING), 1 resolved"."""
        counts: dict[Status, int] = {}
        for event in self.problems:
            counts[event.status] = counts.get(event.status, 0) + 1
        parts = []
        if self.problems:
            by = ", ".join(f"{n} {s.name}" for s, n in sorted(counts.items(), key=lambda kv: -kv[0].severity))
            noun = "problem" if len(self.problems) == 1 else "problems"
            parts.append(f"{len(self.problems)} {noun} ({by})")
        if self.resolved:
            parts.append(f"{len(self.resolved)} resolved")
        if self.notices:
            parts.append(f"{len(self.notices)} notice{'s' if len(self.notices) > 1 else ''}")
        if self.tests:
            # notify-test: a test message is no problem, whatever severity it was sent as.
            parts.append("test message" if len(self.tests) == 1 else f"{len(self.tests)} test messages")
        return ", ".join(parts) or "nothing to report"


def cli_for(config_path: str | None, env_config: str | None) -> str:
    """The command to put in a message's footer: `watchdogs` alone finds only
    $WATCHDOGS_CONFIG or ./watchdogs.toml, and the reader runs it from another folder, often
    another host; so `--config` with the absolute path, unless $WATCHDOGS_CONFIG names that
    same file (the reader's shell has it too, as the scheduler's did)."""
    if not config_path:
        return "watchdogs"
    path = os.path.abspath(config_path)
    if env_config and os.path.abspath(os.path.expanduser(env_config)) == path:
        return "watchdogs"
    return f"watchdogs --config {shlex.quote(path)}"
