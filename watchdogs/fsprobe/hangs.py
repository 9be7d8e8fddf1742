"""Hangs that trainguard found from inside the training, as the cluster side reports them.

Two sources, both in the heartbeat folder: a rank's heartbeat in phase `hung` (the hang
is happening now: the rank is in its grace before exiting, or frozen), and the hang log
`hangs.jsonl` (one line per rank per hang, kept across requeues, so a hang is reported
even when the job was requeued before the watchdog's next tick). Pure functions.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainguard.hangs.record import HangEvent, describe, first_to_stop
from trainguard.heartbeat import Heartbeat
from watchdogs.fsprobe.staleness import Verdict
from watchdogs.humanize import duration, ordinal
from watchdogs.result import Status

DAY = 86400.0


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


def recent_hang(events: Sequence[HangEvent], now: float, window: float) -> Verdict | None:
    """CRITICAL for a hang logged within `window` (max_age): who stopped first, where the
    others were stuck, where the chain restarted from, and how many hangs in 24 h."""
    hangs = group(events)
    recent = [h for h in hangs if now - h.time <= window]
    if not recent:
        return None
    last = recent[-1]
    nth = sum(1 for h in hangs if last.time - h.time <= DAY)
    head = last.events[0]
    parts = [f"training hung at step {min(e.step for e in last.events)} (job {last.job_id}, "
             f"restart {last.restart})"]
    first = next((e.first_to_stop for e in last.events if e.first_to_stop), "")
    if first:
        parts.append(f"first to stop: {first}")
    for event in last.events:
        frames = " <- ".join(event.frames[:2]) or "an unknown place"
        parts.append(f"rank {event.rank} ({event.host}) stuck in {frames}")
    restart = f"step {head.checkpoint}" if head.checkpoint >= 0 else "the start (no checkpoint yet)"
    parts.append(f"{head.action}; restarts from {restart}; {ordinal(nth)} hang in 24 h")
    if head.report:
        parts.append(f"report {head.report}")
    details = tuple(f"rank {e.rank}: {e.report}" for e in last.events if e.report)
    return Verdict(Status.CRITICAL, "; ".join(parts), details,
                   fingerprint=f"hang:{last.job_id}:{last.restart}")

