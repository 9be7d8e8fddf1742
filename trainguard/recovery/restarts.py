"""Restarts of a run and restart storms.

Every restart (in place, inside the allocation; a requeue; a resubmission) is recorded in
the run folder with the checkpoint step it starts from. A storm ends the chain on purpose
(exit EXIT_STORM: no requeue, no resubmission):

- `restarts` restarts within `window` (default 5 in 30 min), or
- `no_progress` restarts in a row without the checkpoint step advancing (default 3; it
  generalises `max_hangs_without_progress`, which counted hangs only, to every cause).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainguard._units import format_duration
from trainguard.recovery import journal

KINDS = ("inplace", "requeue", "resubmit")
KIND_WORDS = {"inplace": "restarted in place", "requeue": "requeued", "resubmit": "resubmitted"}
EXIT_STORM = 6


@dataclass(frozen=True)
class Restart:
    at: float
    job: str
    kind: str                  # one of KINDS
    cause: str
    node: str = ""             # the suspect node that caused it ("" when none is known)
    step: int = -1             # the checkpoint step it starts from (-1: from the start)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind = {self.kind!r}: expected one of {', '.join(KINDS)}")

    def sentence(self) -> str:
        where = f" ({self.node})" if self.node else ""
        start = f"from step {self.step:,}" if self.step >= 0 else "from the start"
        return f"job {self.job} {KIND_WORDS[self.kind]} after {self.cause}{where}, {start}"


@dataclass(frozen=True)
class StormPolicy:
    restarts: int = 5          # 0: off
    window: float = 1800.0
    no_progress: int = 3       # 0: off

    def __post_init__(self) -> None:
        if self.restarts < 0 or self.no_progress < 0 or self.window <= 0:
            raise ValueError(f"storm_restarts = {self.restarts}, storm_no_progress = {self.no_progress}, "
                             f"storm_window = {self.window}: expected counts >= 0 (0: off) and a "
                             "duration > 0")


@dataclass(frozen=True)
class Storm:
    reason: str                # "5 restarts in 30 min", "3 restarts without the checkpoint step advancing"
    history: tuple[Restart, ...]

    def lines(self) -> list[str]:
        # Columns as wide as this storm's longest node list: a reader scans them by eye.
        wide = max([10, *(len(r.node) for r in self.history)])
        return [f"{journal.clock_text(r.at)}  {r.kind:<8} {r.cause:<10} node {r.node or '-':<{wide}} "
                f"from step {r.step if r.step >= 0 else '-'} (job {r.job})" for r in self.history]


def record(run_dir: Path, r: Restart) -> None:
    fields = {"job": r.job, "restart": r.kind, "cause": r.cause, "node": r.node, "step": r.step}
    journal.append(run_dir, "restart", r.at, r.sentence(), fields)


def history(run_dir: Path) -> tuple[list[Restart], tuple[str, ...]]:
    j = journal.read(run_dir)
    found, problems = [], list(j.problems)
    for e in j.of("restart"):
        f = e.fields
        try:
            found.append(Restart(e.at, str(f["job"]), str(f["restart"]), str(f["cause"]),
                                 str(f.get("node", "")), int(f.get("step", -1))))
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"{e.origin}: not a restart: {exc}")
    return found, tuple(problems)


def without_progress(restarts: Sequence[Restart]) -> int:
    """Restarts in a row, newest last, since the checkpoint step last advanced."""
    streak, best = 0, None
    for r in restarts:
        if best is None or r.step > best:
            streak, best = 1, r.step
        else:
            streak += 1
    return streak


def storm(restarts: Sequence[Restart], now: float, policy: StormPolicy) -> Storm | None:
    """The storm these restarts (oldest first, the newest included) make, if any."""
    recent = [r for r in restarts if now - r.at < policy.window]
    if 0 < policy.restarts <= len(recent):
        return Storm(f"{len(recent)} restarts in {_span(policy.window)}", tuple(recent))
    stuck = without_progress(restarts)
    if 0 < policy.no_progress <= stuck:
        step = restarts[-1].step
        since = f"step {step:,}" if step >= 0 else "the start (no checkpoint)"
        return Storm(f"{stuck} restarts without the checkpoint step advancing (all from {since})",
                     tuple(restarts[-stuck:]))
    return None


def _span(seconds: float) -> str:
    # "30 min", "2 h": a setting's round value said as it was given
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return format_duration(seconds)
