"""Template filters that keep a message true when it must be short (docs/alert-style.md):
the newest log lines are kept and the oldest cut (and the cut is said at the top), a subject
is cut at a clause or a word, never mid-word, and a `key=` without a value is left out."""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

LOG_MARKER = "last lines of "
# What the job check says it left out of the log, after the path (watchdogs.checks.jobgone).
_CUT_NOTE = re.compile(r" \([^()]*older lines? not shown[^()]*\)$")
SUBJECT_MAX = 110
"""A phone shows 40-110 characters of a subject; what follows is for the mail client."""


def _log_start(details: Sequence[str]) -> int | None:
    """The index of the first log line (after "last lines of PATH:"), or None."""
    for i, line in enumerate(details):
        if str(line).startswith(LOG_MARKER):
            return i + 1
    return None


def newest(details: Sequence[str], limit: int) -> list[str]:
    """At most `limit` lines, keeping the lines before the log and the END of the log: the
    newest log line (Slurm's CANCELLED ... DUE TO TIME LIMIT, a traceback's last line,
    trainguard's exit reason) is the one a person needs. The cut is said where it happens."""
    lines = [str(d) for d in details]
    if len(lines) <= limit:
        return lines
    start = _log_start(lines)
    head = lines[:start] if start is not None and start < limit - 1 else []
    room = max(1, limit - len(head) - 1)
    cut = len(lines) - len(head) - room
    return [*head, f"... {cut} older line{'s' if cut != 1 else ''} not shown (the newest follow)",
            *lines[-room:]]


def log_end(details: Sequence[str]) -> str:
    """The log's last line, when the details hold a log tail; else ""."""
    start = _log_start(details)
    if start is None or start >= len(details):
        return ""
    return str(details[-1])


def headline(text: str, limit: int = SUBJECT_MAX) -> str:
    """`text` whole when it fits; else cut at the last clause ("; ", ": ", " (") that leaves
    a sentence, or at a word, and marked with an ellipsis."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    window = text[:limit - 2]  # room for " …"
    for mark in ("; ", ". ", " ("):
        at = window.rfind(mark)
        if at >= limit // 2:
            return window[:at].rstrip(" :;,") + " …"
    at = window.rfind(" ")
    return (window[:at] if at > limit // 3 else window).rstrip(" :;,(") + " …"


def where(context: Mapping[str, str]) -> str:
    """`key=value` pairs, leaving out keys whose value is empty (`nodes=` says nothing)."""
    return " ".join(f"{k}={v}" for k, v in context.items() if str(v).strip())


def log_path(details: Sequence[str]) -> str:
    """PATH from a "last lines of PATH:" or "last lines of PATH (41 older lines not shown):"
    line, or ""."""
    for line in details:
        text = str(line)
        if text.startswith(LOG_MARKER):
            return _CUT_NOTE.sub("", text[len(LOG_MARKER):].rstrip(":"))
    return ""


def next_step(event: Any, host: str, cli: str = "watchdogs") -> str:
    """What to do next, as a command or a path: the item's runbook when it has one, else
    the log that holds the story, else the Slurm command that shows the job."""
    if event.runbook:
        return str(event.runbook)
    path = log_path(event.details) or getattr(event, "log", "") or event.context.get("log", "")
    if path:
        # Quoted: the command is copied into a shell, and log folders hold spaces.
        return f"tail -n 50 {shlex.quote(path)}   (on {host})"
    job = event.context.get("job")
    if job and event.context.get("state") == "GONE":
        return f"sacct -j {job} -o JobID,State,ExitCode,Elapsed,MaxRSS,NodeList   (on {host})"
    if job:
        return f"squeue -j {job}; scontrol show job {job}   (on {host})"
    nodes = shlex.quote(str(event.context.get("nodes") or ""))
    if nodes != "''":
        # The nodes check: who drained them, when and why (a hostlist's brackets quoted).
        return f"sinfo -R -n {nodes}; scontrol show node {nodes}   (on {host})"
    path = shlex.quote(str(event.context.get("path") or ""))
    if event.context.get("source") == "statvfs" and path != "''":
        return f"df -h {path}; df -i {path}   (on {host})"
    return f"{cli} alerts   (on {host}; `{cli} status` names each item's run-log folder)"
