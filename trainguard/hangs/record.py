"""Hangs across restarts, and which rank stopped first.

The hang count: the requeue-loop protection, for hangs. Every run of a job chain that
hangs records itself (chain, the newest checkpoint's step, the restart count) in
`<checkpoint_dir>/.trainguard-hangs.json`; `max_hangs_without_progress` hangs with no new
checkpoint in between end the chain (exit EXIT_NO_PROGRESS, no requeue). Several ranks of
one run may record the same hang: the record holds the set of runs, so it counts once.

The first to stop: when one rank stops (SIGSTOP, a dead GPU, a hung read), its peers hang
in the next collective and report `hung`. The rank with the lowest completed step is the
straggler; among equals, the one that did not report `hung` (it could not: it is frozen or
dead), then the one whose heartbeat is oldest.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainguard import _files, _text
from trainguard._units import format_duration
from trainguard.heartbeat import Heartbeat
from trainguard.recovery.suspects import Suspicion

HANGS_FILE = ".trainguard-hangs.json"


@dataclass(frozen=True)
class HangCount:
    chain: str
    checkpoint: int            # the newest checkpoint's step when these hangs happened (-1: none)
    runs: tuple[int, ...]      # restart counts of the runs that hung

    @property
    def hangs(self) -> int:
        return len(self.runs)


def next_count(previous: HangCount | None, chain: str, checkpoint: int, run: int) -> HangCount:
    if previous is None or previous.chain != chain or previous.checkpoint != checkpoint:
        return HangCount(chain, checkpoint, (run,))
    return HangCount(chain, checkpoint, tuple(sorted({*previous.runs, run})))


def read_count(directory: Path) -> HangCount | None:
    try:
        data = json.loads((Path(directory) / HANGS_FILE).read_text())
        return HangCount(str(data["chain"]), int(data["checkpoint"]), tuple(int(r) for r in data["runs"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_count(directory: Path, count: HangCount) -> None:
    target = Path(directory) / HANGS_FILE
    _files.clean_stale(target)
    _files.write_atomic(target, json.dumps({"chain": count.chain, "checkpoint": count.checkpoint,
                                            "runs": list(count.runs)}), 0o644)


def chain_ends(count: HangCount, limit: int) -> bool:
    return limit > 0 and count.hangs >= limit


def chain_end_message(count: HangCount, directory: Path) -> str:
    since = "a fresh start" if count.checkpoint < 0 else f"the checkpoint of step {count.checkpoint}"
    return (f"trainguard: job chain {count.chain} hung {count.hangs} times since {since} without "
            f"saving a newer checkpoint; not requeuing again. Read the hang reports, fix the cause, "
            f"then resubmit (a new job is a new chain) or remove {Path(directory) / HANGS_FILE}.")


def first_to_stop(beats: Sequence[Heartbeat]) -> Heartbeat | None:
    """The rank that most likely stopped first, among ranks that have not finished."""
    live = [b for b in beats if b.phase != "done"]
    if not live:
        return None
    return min(live, key=lambda b: (b.step, b.phase == "hung", b.time))


def suspicion(first: Heartbeat, job: str, waiting_in: Sequence[str], at: float) -> Suspicion | None:
    """The node of the rank that stopped first, as the run's suspect (None when its
    heartbeat names no node). Its step is the frozen rank's own, so every peer that records
    it records the same failure (counted once)."""
    if not first.host:
        return None
    where = first.frames or tuple(waiting_in)
    wait = where[0].split(" (")[0] if where else ""
    detail = f"rank {first.rank}" + (f", in {wait}" if first.frames and wait else
                                     f", its peers waiting in {wait}" if wait else "")
    return Suspicion(first.host, "hang", at, first.job_id or job, first.step, detail)


def describe(beat: Heartbeat, now: float) -> str:
    where = f"rank {beat.rank}" + (f" ({beat.host})" if beat.host else "")
    state = (f"hung in {beat.frames[0]}" if beat.phase == "hung" and beat.frames
             else f"{beat.phase}, last heartbeat {format_duration(now - beat.time)} ago")
    return f"{where} at step {beat.step}: {state}"


# ---- the hang log: one JSON line per rank per hang, read by the cluster-side log_stale ----
EVENTS_FILE = "hangs.jsonl"


@dataclass(frozen=True)
class HangEvent:
    """What one rank saw when it found the training hung (after the grace, so that it can
    name the rank that stopped first from its peers' heartbeats)."""

    time: float
    job_id: str
    restart: int
    rank: int
    host: str
    step: int                  # the last step this rank completed
    phase: str
    stalled_for: float
    frames: tuple[str, ...]
    report: str
    checkpoint: int            # the step the next run resumes from (-1: none)
    hangs: int                 # hangs of this chain without a new checkpoint, this one included
    first_to_stop: str         # describe() of the rank that stopped first ("" if unknown)
    action: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HangEvent:
        d = _text.clean(d)   # a frame's path may hold a byte that is not UTF-8 ("\udce9")
        return cls(float(d["time"]), str(d["job_id"]), int(d["restart"]), int(d["rank"]), str(d["host"]),
                   int(d["step"]), str(d["phase"]), float(d["stalled_for"]),
                   tuple(str(f) for f in d.get("frames", ())), str(d.get("report", "")),
                   int(d.get("checkpoint", -1)), int(d.get("hangs", 0)),
                   str(d.get("first_to_stop", "")), str(d.get("action", "")))


def append_event(directory: Path, event: HangEvent) -> None:
    # One short line in one write() with O_APPEND: lines of several ranks never interleave.
    # O_NOFOLLOW: a symlink planted at the name in a shared run folder is refused, not followed.
    _files.append_line(Path(directory) / EVENTS_FILE,
                       (json.dumps(_text.clean(asdict(event))) + "\n").encode())


def parse_events(text: str) -> list[HangEvent]:
    """Every whole, readable line of (the tail of) a hang log; the rest is skipped."""
    events = []
    for line in text.splitlines():
        try:
            events.append(HangEvent.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return events
