"""Per-rank heartbeat records: the contract between trainguard (writer) and the
cluster-side `log_stale` check (reader).

One small JSON file per rank, `<dir>/rank-<R>.json`, replaced atomically (write to a
temporary name, then rename), so a reader never sees half a record:

    {"rank": 0, "step": 1234, "phase": "train", "time": 1763780000.5,
     "pid": 4242, "host": "node1", "job_id": "88", "problem": ""}

`phase` is one of PHASES; `time` is the Unix time the record was written; `problem` is what
the guard found wrong with the training's own set-up (e.g. "cannot write into the checkpoint
folder ..."), "" when nothing is. A rank whose progress watchdog found it hung
(trainguard.hangs.watch) writes `"phase": "hung"` with `stalled_for` (s without progress), `frames`
(the main thread's innermost frames) and `report` (the path of its hang report).
`health` (trainguard.health.record) is what the rank measured about its training: loss,
throughput, step and compute time, findings; absent when health is off.

Which run of the job wrote it: `restart` (Slurm's SLURM_RESTART_COUNT: 0 for the first run,
one more per requeue) and `inplace` (the template's in-place restart, TRAINGUARD_INPLACE_RESTART);
-1 when unknown (outside Slurm, or written by an older trainguard). A requeued job keeps its
id, and a rank that does not start again leaves its last record behind: whatever explains
an ending reads only the records of that run (`of_run`), never an earlier run's `hung`.

How a run ended (`run_end`) is read from the same records: the guard writes `"phase": "done"`
when the training finished (`finish()`, the end of its `with` block) and `"stopping"` when it
stopped the training itself; rank 0's exit file (trainguard.stopping.exits.write_exit_file: the code,
then "<cause> after step N; ...") is written by a stop only, and names the cause. The batch
templates keep it beside the heartbeat folder (EXIT_FILE_BESIDE), where the watchdog looks.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainguard import _files
from trainguard._text import from_os
from trainguard.causes import Cause
from trainguard.health.record import TrainingHealth

if TYPE_CHECKING:
    from trainguard.health.monitor import Health

PHASES = ("start", "train", "eval", "data_loading", "saving", "stopping", "done", "hung")
# Phases in which a rank may legitimately not advance its step for a long time.
BUSY_PHASES = ("eval", "data_loading", "saving", "stopping")
# The batch templates' layout (slurm/train-*.slurm): $RUN_DIR/heartbeat holds the records and
# $RUN_DIR/exit-code.$SLURM_JOB_ID the exit file (tests/foundation/test_templates_layout.py).
EXIT_FILE_BESIDE = "exit-code.{job_id}"
# How a run ended, as trainguard saw it.
FINISHED, STOPPED = "finished", "stopped"


@dataclass(frozen=True)
class Heartbeat:
    rank: int
    step: int
    phase: str
    time: float
    pid: int = 0
    host: str = ""
    job_id: str = ""
    problem: str = ""
    stalled_for: float = 0.0
    frames: tuple[str, ...] = ()
    report: str = ""
    health: TrainingHealth | None = None
    restart: int = -1
    inplace: int = -1

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Heartbeat:
        # from_os: a frame's file path may hold a byte that is not UTF-8 ("\udce9" in JSON),
        # which no later write could encode.
        return cls(int(data["rank"]), int(data["step"]), str(data["phase"]), float(data["time"]),
                   int(data.get("pid", 0)), from_os(str(data.get("host", ""))),
                   from_os(str(data.get("job_id", ""))),
                   from_os(str(data.get("problem", ""))), float(data.get("stalled_for", 0.0)),
                   tuple(from_os(str(f)) for f in data.get("frames", ())),
                   from_os(str(data.get("report", ""))),
                   _health(data.get("health")), int(data.get("restart", -1)), int(data.get("inplace", -1)))


def _health(data: Any) -> TrainingHealth | None:
    """The health part, or None when absent or unreadable: a bad health record must not
    cost the liveness checks (log_stale) the rank's step and phase."""
    if not isinstance(data, dict):
        return None
    try:
        return TrainingHealth.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None


def node_name() -> str:
    """The Slurm node this rank runs on (what squeue and the user see), else the hostname."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def this_run() -> tuple[int, int]:
    """(restart, in-place restart) of the run this process belongs to; -1 outside a job."""
    env = os.environ
    if not env.get("SLURM_JOB_ID"):
        return -1, -1
    return _count(env.get("SLURM_RESTART_COUNT")), _count(env.get("TRAINGUARD_INPLACE_RESTART"))


def _count(text: str | None) -> int:
    # Absent: the first run (Slurm sets SLURM_RESTART_COUNT only after a requeue).
    return int(text) if text and text.strip().isdigit() else 0


def of_run(records: Sequence[Heartbeat], job_id: str, restart: int | None = None,
           inplace: int | None = None, started: float | None = None) -> list[Heartbeat]:
    """The records of one run of `job_id`: its restart count and in-place restart when given
    (a record that does not say, from an older trainguard, is kept), written at or after
    `started` when given (the run's start by Slurm's clock: a minute of skew is allowed)."""
    def mine(r: Heartbeat) -> bool:
        return ((not r.job_id or r.job_id == job_id)
                and (restart is None or r.restart < 0 or r.restart == restart)
                and (inplace is None or r.inplace < 0 or r.inplace == inplace)
                and (started is None or r.time >= started - 60.0))
    return [r for r in records if mine(r)]


def heartbeat_path(directory: Path, rank: int) -> Path:
    return Path(directory) / f"rank-{rank}.json"


def write_heartbeat(directory: Path, rank: int, step: int, phase: str,
                    now: float | None = None, job_id: str = "", problem: str = "",
                    stalled_for: float = 0.0, frames: tuple[str, ...] = (), report: str = "",
                    health: TrainingHealth | None = None) -> Heartbeat:
    restart, inplace = this_run()
    record = Heartbeat(rank, step, phase, time.time() if now is None else now, os.getpid(),
                       node_name(), job_id or os.environ.get("SLURM_JOB_ID", ""), from_os(problem),
                       stalled_for, tuple(from_os(f) for f in frames), from_os(report), health,
                       restart, inplace)
    data = asdict(record)
    if health is None:
        del data["health"]
    # mkstemp, then rename: a name planted in a shared run folder is never written through.
    _files.write_atomic(heartbeat_path(directory, rank), json.dumps(data), 0o644)
    return record


def read_heartbeats(directory: Path) -> list[Heartbeat]:
    """Every readable record in `directory`, by rank. Unreadable files are skipped."""
    records = []
    for path in sorted(Path(directory).glob("rank-*.json")):
        try:
            records.append(Heartbeat.from_dict(json.loads(path.read_text())))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return sorted(records, key=lambda r: r.rank)


class HeartbeatWriter:
    """Rate-limited writer for one rank: at most one record per `every` seconds of the
    monotonic clock, except on a phase change, which is written at once (so `saving` or
    `eval` shows before a long pause). A failing filesystem never stops the training."""

    def __init__(self, directory: Path, rank: int, every: float, job_id: str = "") -> None:
        self.directory = Path(directory)
        self.rank = rank
        self.every = every
        self.job_id = job_id
        self.phase = "start"
        self.problem = ""
        self.health: Health | None = None    # the training's health, written with each record
        self.next_at = float("-inf")
        self._warned = False
        self._cleaned = False

    def beat(self, step: int, now: float, phase: str | None = None) -> None:
        changed = phase is not None and phase != self.phase
        if phase is not None:
            self.phase = phase
        if not changed and now < self.next_at:
            return
        self.next_at = now + self.every
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._clean_once()
            write_heartbeat(self.directory, self.rank, step, self.phase, job_id=self.job_id,
                            problem=self.problem,
                            health=self.health.record if self.health is not None else None)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                logging.getLogger("trainguard").warning(
                    "trainguard: cannot write the heartbeat in %s: %s", self.directory, exc)


    def _clean_once(self) -> None:
        # A rank SIGKILLed between mkstemp and rename left its temporary file: the next
        # writer of the same rank removes it (the rank may change once: agreement).
        if not self._cleaned:
            self._cleaned = True
            _files.clean_stale(heartbeat_path(self.directory, self.rank))


@dataclass(frozen=True)
class RunEnd:
    """How one run of a job ended, as trainguard recorded it: FINISHED (the training ended
    its loop) or STOPPED (the guard stopped it), at `step`. For a stop, `cause` and
    `exit_code` come from the exit file; None when it is not there to say."""

    kind: str
    step: int
    cause: Cause | None = None
    exit_code: int | None = None


def exit_file_beside(directory: Path, job_id: str) -> Path:
    """Where the batch templates write the exit file of `job_id`, given the heartbeat folder."""
    return Path(directory).parent / EXIT_FILE_BESIDE.format(job_id=job_id)


def parse_exit_file(text: str) -> tuple[int | None, Cause | None]:
    """The code and the cause of an exit file ("0\nkill_switch after step 12; ..."); None
    for what it does not say (a stop at start-up writes the code alone)."""
    lines = text.splitlines()
    code = int(lines[0]) if lines and lines[0].strip().lstrip("-").isdigit() else None
    words = lines[1] if len(lines) > 1 else ""
    label = words.split(" after step ", 1)[0] if " after step " in words else ""
    cause = next((c for c in Cause if c.label == label), None)
    return code, cause


def run_end(records: Sequence[Heartbeat], job_id: str, exit_text: str | None = None,
            started: float | None = None) -> RunEnd | None:
    """How the run of `job_id` that started at `started` (None: its latest) ended, from its
    ranks' last records and (for a stop) the exit file's text; None when the records do not
    say (the run was killed from outside while training, or there are none)."""
    mine = of_run(records, job_id, started=started)
    if started is None:   # the newest run that wrote: an earlier run's ranks are not its own
        newest = max((r.restart for r in mine), default=-1)
        mine = [r for r in mine if r.restart < 0 or r.restart == newest]
    if not mine:
        return None
    step = max(r.step for r in mine)
    code, cause = parse_exit_file(exit_text) if exit_text else (None, None)
    # Only a stop writes the exit file (a finish does not; the templates remove an earlier
    # run's): a stop at start-up (the kill switch already there) says "done" and a code alone.
    if any(r.phase == "stopping" for r in mine) or code is not None:
        return RunEnd(STOPPED, step, cause, code)
    if all(r.phase == "done" for r in mine):
        return RunEnd(FINISHED, step)
    return None
