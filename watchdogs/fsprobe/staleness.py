"""Is a training hung? Pure judgements of a log's age, its progress counter and per-rank
heartbeat records, given the time and when the job started (a fresh start has not had
time to write anything yet).

A verdict's fingerprint names *what* is hung (the log, the ranks), never how it shows: a
stale log that also shows a stuck counter is the same problem, not a new alert."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainguard.heartbeat import BUSY_PHASES, Heartbeat
from watchdogs.humanize import duration as format_duration
from watchdogs.humanize import moment
from watchdogs.result import Status


@dataclass(frozen=True)
class Verdict:
    status: Status
    summary: str
    details: tuple[str, ...] = ()
    fingerprint: str = ""


@dataclass(frozen=True)
class Progress:
    value: float
    changed_at: float
    path: str


def file_age(path: str, mtime: float, now: float, max_age: float, since: float | None) -> Verdict:
    age = now - max(mtime, since or 0.0)
    written = f"{path} last written {format_duration(now - mtime)} ago ({_at(mtime)})"
    if age > max_age:
        return Verdict(Status.CRITICAL, f"hung? {written} (max_age {format_duration(max_age)})",
                       fingerprint=f"log:{path}")
    return Verdict(Status.OK, written)


def last_number(pattern: Any, text: str) -> float | None:
    """The group of the last match of `pattern` (a user pattern, watchdogs.userregex) in
    `text` as a number. Raises RegexTimeout for a pattern that runs away."""
    from watchdogs.userregex import finditer

    value = None
    for match in finditer(pattern, text, "the log's tail"):
        try:
            value = float(match.group(1))
        except (TypeError, ValueError):
            continue
    return value


def advance(previous: Progress | None, value: float, path: str, now: float) -> Progress:
    """The progress memory after this tick: a new file, a new value, or unchanged."""
    if previous is None or previous.path != path or previous.value != value:
        return Progress(value, now, path)
    return previous


def judge_progress(previous: Progress | None, current: Progress, now: float, max_age: float,
                   since: float | None) -> Verdict:
    """CRITICAL when the counter has not moved for longer than max_age (measured from the
    job's start at the earliest)."""
    shown = f"{current.value:g}"
    if previous is not None and previous.path == current.path and current.value < previous.value:
        return Verdict(Status.OK, f"progress restarted at {shown} (was {previous.value:g})")
    stuck = now - max(current.changed_at, since or 0.0)
    if stuck > max_age:
        return Verdict(Status.CRITICAL, f"hung? progress stuck at {shown} for "
                                        f"{format_duration(now - current.changed_at)} "
                                        f"(since {_at(current.changed_at)}; "
                                        f"max_age {format_duration(max_age)})",
                       fingerprint=f"log:{current.path}")
    return Verdict(Status.OK, f"progress {shown}")


def _at(timestamp: float) -> str:
    """A Unix time as people read it: date, time and this host's time zone."""
    return moment(datetime.fromtimestamp(timestamp).astimezone())


def _ranks(ranks: Sequence[int]) -> str:
    """[0, 1, 2, 5] -> "ranks 0-2,5"."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    text = ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)
    return f"rank{'s' if len(ranks) > 1 else ''} {text}"


def judge_heartbeats(beats: Sequence[Heartbeat], now: float, max_age: float,
                     since: float | None) -> Verdict:
    """A rank in a busy phase (eval, saving, stopping) or done is not hung; others must
    have written within max_age. A rank left behind while others advance is named."""
    if not beats:
        return Verdict(Status.WARNING, "no heartbeat records (is trainguard writing them?)")
    floor = since or 0.0
    busy = [b for b in beats if b.phase in BUSY_PHASES]
    active = [b for b in beats if b.phase not in BUSY_PHASES and b.phase != "done"]
    stale = [b for b in active if now - max(b.time, floor) > max_age]
    fresh = [b for b in beats if b not in stale]
    details = tuple(f"rank {b.rank} {b.phase} at step {b.step} for {format_duration(now - b.time)}"
                    for b in busy)
    top = max(b.step for b in beats)
    if stale and not fresh:
        last = max(b.time for b in stale)
        return Verdict(Status.CRITICAL, f"hung? all {len(stale)} ranks silent for "
                                        f"{format_duration(now - last)} (since {_at(last)}, last step "
                                        f"{top})", details,
                       fingerprint="ranks:all")
    if stale:
        worst = min(stale, key=lambda b: b.step)
        others = [b for b in fresh if b.rank != worst.rank]
        reached = max(b.step for b in others) if others else top
        summary = (f"hung? {_ranks([b.rank for b in stale])} stuck at step {worst.step} (last beat "
                   f"{format_duration(now - worst.time)} ago, {_at(worst.time)}) "
                   f"while {_ranks([b.rank for b in others])}"
                   f" reached {reached}")
        return Verdict(Status.CRITICAL, summary, details,
                       fingerprint="ranks:" + ",".join(str(b.rank) for b in stale))
    newest = max(b.time for b in beats)
    slowest = min(beats, key=lambda b: b.step)
    return Verdict(Status.OK, f"{len(beats)} ranks alive at step {top} (slowest rank {slowest.rank} "
                              f"at {slowest.step}), last beat {format_duration(now - newest)} ago",
                   details)


def problem_kind(problem: str) -> str:
    """What kind of set-up problem a heartbeat reports, for the fingerprint: the text names
    a folder and an errno, which may change between runs; the kind does not."""
    return "cannot-save" if "checkpoint folder" in problem else "setup"


def judge_problems(beats: Sequence[Heartbeat]) -> Verdict | None:
    """A problem the guard found in the training's own set-up (trainguard writes it into
    every rank's heartbeat). No checkpoint can be written: CRITICAL, because the next
    preemption, time limit or stop request ends the training with no checkpoint and no
    requeue (work since the last save is lost). Another problem: WARNING."""
    troubled = [b for b in beats if b.problem]
    if not troubled:
        return None
    kinds = sorted({problem_kind(b.problem) for b in troubled})
    first = troubled[0]
    where = _ranks([b.rank for b in troubled])
    if "cannot-save" in kinds:
        summary = (f"training cannot save: {first.problem} ({where}); a preemption, time limit or "
                   f"stop request will end it without a checkpoint and without requeue")
        status = Status.CRITICAL
    else:
        summary = f"training set-up problem: {first.problem} ({where})"
        status = Status.WARNING
    details = tuple(f"rank {b.rank}: {b.problem}" for b in troubled if b.problem != first.problem)
    return Verdict(status, summary, details, fingerprint="problem:" + ",".join(kinds))
