"""Hangs that trainguard found from inside the training, as the cluster side reports them.

Two sources, both in the heartbeat folder: a rank's heartbeat in phase `hung` (the hang
is happening now: the rank is in its grace before exiting, or frozen), and the hang log
`hangs.jsonl` (one line per rank per hang, kept across requeues, so a hang is reported
even when the job was requeued before the watchdog's next tick). A logged hang is judged
with what came after it (`Aftermath`): a restart in the run's recovery record, or
heartbeats of a later run, resolve it with the recovery's own summary line. Pure functions.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainguard.hangs.record import HangEvent, describe, first_to_stop
from trainguard.heartbeat import Heartbeat
from watchdogs.fsprobe.staleness import Verdict
from watchdogs.humanize import duration, ordinal
from watchdogs.result import Status

DAY = 86400.0
# The hang log's times come from the compute nodes' clocks, the recovery record's from the
# batch host's: a restart recorded this much "before" the hang still came after it. (A
# restart truly before a hang is at least the hang timeout, minutes, before it.)
CLOCK_SKEW_S = 10.0
# A restart ends the hung run (trainguard's EXIT_REQUEUE): what follows is the template's.
_EXITS_FOR_RESTART = re.compile(r"^exiting 140\b")
# Heartbeat phases of a run that is not going on.
_ENDING = frozenset({"hung", "stopping", "done"})


@dataclass(frozen=True)
class Aftermath:
    """What happened after the logged hangs: the run's recovery record (trainguard.recovery:
    its entries, oldest first, and the newest summary line) and the current heartbeats."""

    entries: tuple[Mapping[str, Any], ...] = ()
    summary: str = ""
    beats: tuple[Heartbeat, ...] = ()


def hung_now(beats: Sequence[Heartbeat], now: float, job_id: str | None) -> Verdict | None:
    """CRITICAL when a rank of the running job (any job if unknown) says `hung`."""
    mine = [b for b in beats if job_id is None or not b.job_id or b.job_id == job_id]
    hung = [b for b in mine if b.phase == "hung"]
    if not hung:
        return None
    first = first_to_stop(mine)
    where = hung[0]
    parts = [f"training hung at step {min(b.step for b in mine)}"]
    if first is not None:
        parts.append(f"first to stop: {describe(first, now)}")
    parts.extend(_stuck(b) for b in hung)
    if where.report:
        parts.append(f"report {where.report}")
    details = tuple(describe(b, now) for b in mine)
    return Verdict(Status.CRITICAL, "; ".join(parts), details, fingerprint=f"hung:{where.job_id}")


def _stuck(beat: Heartbeat) -> str:
    host = f" ({beat.host})" if beat.host else ""
    frames = " <- ".join(beat.frames[:2]) or "an unknown place"
    return f"rank {beat.rank}{host} stuck in {frames} for {duration(beat.stalled_for)}"


@dataclass(frozen=True)
class Hang:
    """One hang of one run: the events its ranks logged."""

    job_id: str
    restart: int
    events: tuple[HangEvent, ...]

    @property
    def time(self) -> float:
        return min(e.time for e in self.events)


def group(events: Sequence[HangEvent]) -> list[Hang]:
    runs: dict[tuple[str, int], list[HangEvent]] = {}
    for event in events:
        runs.setdefault((event.job_id, event.restart), []).append(event)
    return sorted((Hang(j, r, tuple(es)) for (j, r), es in runs.items()), key=lambda h: h.time)


def recent_hang(events: Sequence[HangEvent], now: float, window: float,
                after: Aftermath | None = None) -> Verdict | None:
    """The newest hang logged within `window` (max_age): CRITICAL with who stopped first,
    where the others were stuck, what follows and how many hangs in 24 h, until a recovery
    follows it (OK with the recovery's summary line: the alert is resolved with it), or a
    restart storm ends the chain (CRITICAL, saying so)."""
    hangs = group(events)
    recent = [h for h in hangs if now - h.time <= window]
    if not recent:
        return None
    last = recent[-1]
    after = after or Aftermath()
    what = (f"training hung at step {min(e.step for e in last.events)} (job {last.job_id}, "
            f"restart {last.restart})")
    fingerprint = f"hang:{last.job_id}:{last.restart}"
    since = _since(last, after)
    if since is not None:
        status, words = since
        return Verdict(status, f"{what}; {words}" if status is not Status.OK else
                       f"recovered from the hang at step {min(e.step for e in last.events)} "
                       f"(job {last.job_id}, restart {last.restart}): {words}",
                       fingerprint=fingerprint)
    nth = sum(1 for h in hangs if last.time - h.time <= DAY)
    head = last.events[0]
    parts = [what]
    first = next((e.first_to_stop for e in last.events if e.first_to_stop), "")
    if first:
        parts.append(f"first to stop: {first}")
    for event in last.events:
        frames = " <- ".join(event.frames[:2]) or "an unknown place"
        parts.append(f"rank {event.rank} ({event.host}) stuck in {frames}")
    restart = f"step {head.checkpoint}" if head.checkpoint >= 0 else "the start (no checkpoint yet)"
    parts.append(f"{next_words(head.action, spares_left(after.entries, last.job_id))}; "
                 f"restarts from {restart}; {ordinal(nth)} hang in 24 h")
    if head.report:
        parts.append(f"report {head.report}")
    details = tuple(f"rank {e.rank}: {e.report}" for e in last.events if e.report)
    return Verdict(Status.CRITICAL, "; ".join(parts), details, fingerprint=fingerprint)


def next_words(action: str, spares: int | None) -> str:
    """What follows the hang, promising nothing the batch script decides: trainguard's exit
    for a restart ("exiting 140 ...") is followed by the template's own choice."""
    if not _EXITS_FOR_RESTART.match(action):
        return action or "trainguard's action is not recorded"
    spare = "" if spares is None else f" ({spares} spare{'' if spares == 1 else 's'} left)"
    return f"trainguard ends the run (exit 140); the template decides: restart in place{spare} or requeue"


def spares_left(entries: Sequence[Mapping[str, Any]], job_id: str) -> int | None:
    """Spare nodes of the job's allocation, from its newest in-place plan; None: no plan."""
    for entry in reversed(entries):
        if entry.get("kind") == "plan" and str(entry.get("job", "")) == job_id:
            spares = entry.get("spares_left")
            return spares if isinstance(spares, int) else None
    return None


def _since(hang: Hang, after: Aftermath) -> tuple[Status, str] | None:
    """What came after `hang`: (OK, the recovery's summary), (CRITICAL, a storm that ended the
    chain), or None while nothing did (still recovering, or nothing recovers it)."""
    hung_at = max(e.time for e in hang.events)
    for entry in reversed(after.entries):
        try:
            at = float(entry.get("at", 0.0))
        except (TypeError, ValueError):
            continue
        if at < hang.time - CLOCK_SKEW_S:
            break  # the record is in time order: older entries came before the hang
        if not _same_or_later(str(entry.get("job", "")), hang.job_id):
            continue
        if entry.get("kind") == "storm":
            return Status.CRITICAL, (f"restart storm: {entry.get('reason', '?')}; the chain was "
                                     "ended on purpose (no requeue, no resubmission)")
        if entry.get("kind") == "restart":
            return Status.OK, str(entry.get("summary") or after.summary or entry.get("text", "restarted"))
    step = max(e.step for e in hang.events)
    later = [b for b in after.beats if b.job_id and b.phase not in _ENDING and b.time > hung_at
             and (_later_job(b.job_id, hang.job_id)
                  or (b.job_id == hang.job_id and (b.restart > hang.restart or b.step > step)))]
    if later:
        beat = max(later, key=lambda b: b.step)
        again = f"restart {beat.restart}" if beat.restart >= 0 else "a new run"
        return Status.OK, (f"job {beat.job_id} ({again}) trains again: rank {beat.rank} at step "
                           f"{beat.step}")
    return None


def _same_or_later(job: str, hung: str) -> bool:
    return job == hung or _later_job(job, hung)


def _later_job(job: str, hung: str) -> bool:
    """A job submitted after `hung` (a resubmission: job ids grow with time)."""
    head, other = job.split("_")[0], hung.split("_")[0]
    return head.isdigit() and other.isdigit() and int(head) > int(other)
