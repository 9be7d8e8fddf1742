"""Did the chain's first instance live? `watchdogs start` waits, bounded, for the job it
submitted to tick once, and says which of four things happened:

- it lived: the instance recorded itself and published its first tick (the state view
  holds its row, not ended): "instance 7 is running on node1 (job 123) and ticked at ...";
- it failed: the job left the queue before its first tick (or its instance ended at once):
  the job's state and exit code (one sacct), the last line of its output file, and the fix;
- it is still pending (or running but not ticked yet) when the wait ends: Slurm's reason
  and what helps;
- Slurm could not be asked at all.

A submitted job that dies at its first breath (a venv the compute nodes lack, a module not
loaded) would otherwise leave nothing behind but a log file nobody reads: no successor, no
alert, an empty status table.

`judge` is pure (what one look at the queue and the state shows); `watch` repeats the looks
with the clock, the sleep and the Slurm runner passed in; `Looker` holds the side effects
(one squeue a look, the state view, at most one sacct and one bounded read of the log).
"""
from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from watchdogs import filekind, textsafe
from watchdogs.errors import SlurmError, WatchdogsError
from watchdogs.humanize import moment_seconds
from watchdogs.scheduler import chain
from watchdogs.slurmctl.runner import SlurmRunner, listing, run_slurm, unparsed
from watchdogs.slurmctl.sacct import run_sacct

DEFAULT_WAIT_S = 90.0
"""How long `start` waits for the first tick: an idle cluster starts the job in seconds and
the instance ticks a few seconds after; a busy one gets the pending reason instead."""
POLL_S = 1.0
LOG_TAIL_BYTES = 8192
SACCT_TIMEOUT_S = 15.0

LIVED, PENDING, FAILED, UNKNOWN = 0, 1, 2, 3
"""`watchdogs start`'s exit codes (Nagios-like, as `status` uses them): the first instance
ticked; still pending (or running, not ticked yet) when the wait ended; it ended before its
first tick; Slurm could not be asked."""


@dataclass(frozen=True)
class Tick:
    """The instance row a job left in the state view."""

    instance: int
    host: str
    heartbeat: float
    ended: float | None
    reason: str | None


@dataclass(frozen=True)
class Queued:
    """The job as squeue shows it while it is live."""

    state: str
    reason: str
    start: str
    """Slurm's expected start (%S): a time, or "N/A"."""
    node: str
    """Where it runs (%N); empty while pending."""


@dataclass(frozen=True)
class Look:
    """One look: the job in the queue (None: it left it), the instance it recorded, and
    whether Slurm could be asked."""

    job: Queued | None
    tick: Tick | None
    slurm_error: str | None = None


@dataclass(frozen=True)
class Ending:
    """What is known of a job that left the queue before its first tick."""

    state: str | None
    exit_code: str | None
    last_line: str | None
    log: Path


@dataclass(frozen=True)
class FirstBreath:
    verdict: str
    """"lived", "pending", "starting", "failed" or "unknown"."""
    lines: tuple[str, ...]
    exit_code: int


def _when(ts: float) -> str:
    return moment_seconds(datetime.fromtimestamp(ts).astimezone())


def judge(job_id: str, look: Look, out_of_time: bool) -> FirstBreath | None:
    """Pure: the verdict one look allows, or None to look again. A job that left the queue
    without a tick is not judged here (`failed` needs its ending first)."""
    tick = look.tick
    if tick is not None and tick.ended is None:
        node = look.job.node if look.job is not None and look.job.node else tick.host
        host = f" (host {tick.host})" if node != tick.host else ""
        return FirstBreath("lived", (f"instance {tick.instance} (job {job_id}) is running on {node}{host} "
                                     f"and ticked at {_when(tick.heartbeat)}",), LIVED)
    if look.slurm_error is not None:
        if not out_of_time:
            return None
        return FirstBreath("unknown", (f"cannot tell whether job {job_id} started: Slurm did not answer "
                                       f"({look.slurm_error}); `watchdogs status` shows it once it runs",),
                           UNKNOWN)
    job = look.job
    if job is None or tick is not None:
        return None  # left the queue, or its instance ended: `failed` says how
    if not out_of_time:
        return None
    if job.state == "PENDING":
        reason = job.reason or "None"
        begins = f", Slurm expects it to start at {job.start}" if job.start not in ("", "N/A") else ""
        return FirstBreath("pending", (f"job {job_id} is still pending ({reason}){begins}",
                                       f"what helps: {pending_fix(job_id, reason)}",
                                       "`watchdogs status` shows when it runs"), PENDING)
    return FirstBreath("starting", (f"job {job_id} is {job.state} but no tick of its instance is seen here "
                                    "yet: its log says why; if it runs, its state folder is not the one this "
                                    "host sees (state_dir must be on a filesystem the compute nodes share)",),
                       PENDING)


def failed(job_id: str, tick: Tick | None, ending: Ending, python: str | None) -> FirstBreath:
    """Pure: the verdict for a job that ended before its first tick."""
    how = [f"state {ending.state}" if ending.state else None,
           f"exit code {ending.exit_code}" if ending.exit_code else None]
    said = ", ".join(h for h in how if h) or "Slurm no longer knows how"
    if tick is not None:
        said += f"; its instance {tick.instance} on {tick.host} ended: {tick.reason or 'no reason recorded'}"
    lines = [f"job {job_id} failed at start: it ended before its first tick ({said})"]
    lines.append(f"its log {ending.log}: " + (f"last line: {ending.last_line}" if ending.last_line
                                               else "no line (empty or unreadable)"))
    lines.append(f"fix: {diagnose(ending.last_line or '', ending.exit_code, python, ending.log)}")
    return FirstBreath("failed", tuple(lines), FAILED)


_MISSING = re.compile(r"(/\S*?):? No such file or directory")
_DENIED = re.compile(r"(/\S*?):? Permission denied")


def diagnose(last_line: str, exit_code: str | None, python: str | None, log: Path) -> str:
    """Pure: what to do, from the last log line of a job that died before its first tick."""
    missing = _MISSING.search(last_line)
    if missing or (exit_code or "").startswith("127"):
        path = missing.group(1).rstrip(":") if missing else (python or "the Python of WATCHDOGS_PYTHON")
        return (f"the compute node has no {path}: install the venv on a path the compute nodes share "
                "(or load the module that provides its Python), then `watchdogs start` again")
    if "No module named" in last_line and "watchdogs" in last_line:
        return (f"{python or 'the job’s Python'} has no slurm-watchdogs installed: install it into that "
                "venv, or set WATCHDOGS_PYTHON to the Python that has it, then `watchdogs start` again")
    denied = _DENIED.search(last_line)
    if denied:
        return (f"the job may not run {denied.group(1).rstrip(':')}: its folders must be readable and "
                "searchable by you on the compute nodes")
    if "error: no config" in last_line or "config error" in last_line:
        return "`watchdogs validate` names what is wrong in the config; fix it, then `watchdogs start` again"
    if "stop file" in last_line:
        return "the stop file appeared while it started: `watchdogs start` removes it"
    if (exit_code or "").startswith(("137", "0:9")) or "oom" in last_line.lower():
        return "it was killed (memory?): raise #SBATCH --mem in the batch script"
    return f"read the whole log ({log}); `watchdogs run` on a compute node (srun --pty) shows the same start"


_PENDING_FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("JobHeld",), "it is held: `scontrol release {job}` lets it start"),
    (("Resources", "Priority"), "the cluster is busy: it starts when room frees up; a partition with idle "
                                "nodes (SBATCH_PARTITION), a shorter time limit (SBATCH_TIMELIMIT) or a "
                                "higher QOS (SBATCH_QOS) starts it sooner (`watchdogs doctor`: other homes)"),
    (("Partition", "ReqNodeNotAvail", "NodeDown", "Nodes_required"),
     "its partition cannot run it now: pick one that can with SBATCH_PARTITION (`sinfo` lists them), "
     "then `watchdogs stop` and `watchdogs start`"),
    (("QOS", "Assoc", "AccountNotAllowed", "InvalidAccount", "InvalidQOS"),
     "a limit of your account or QOS holds it: choose another with SBATCH_ACCOUNT or SBATCH_QOS, or ask your "
     "admins"),
    (("Dependency",), "another job of the same name runs (singleton): `squeue --me` shows it"),
    (("BeginTime",), "it waits for its begin time"),
)


def pending_fix(job_id: str, reason: str) -> str:
    """Pure: what helps a job pending for Slurm's `reason`."""
    for marks, fix in _PENDING_FIXES:
        if reason.startswith(marks):
            return fix.format(job=job_id)
    return f"`scontrol show job {job_id}` says more about why it waits"


class Looker:
    """The side effects of watching one job: each method is one read."""

    def __init__(self, settings: chain.ChainSettings, env: Mapping[str, str] | None = None,
                 runner: SlurmRunner = run_slurm) -> None:
        self.settings = settings
        self.env = env
        self.runner = runner

    def look(self, job_id: str) -> Look:
        # The queue first, the state after: an instance that ticked and then ended has its
        # row in the view by the time its job left the queue.
        try:
            job = self.queued(job_id)
        except SlurmError as exc:
            return Look(None, self.tick(job_id), str(exc))
        return Look(job, self.tick(job_id))

    def queued(self, job_id: str) -> Queued | None:
        """The job while it is live (one squeue), None once it left the queue."""
        argv = ["squeue", "--me", "--noheader", f"--jobs={job_id}", f"--states={chain.LIVE_STATES}",
                "--format=%i|%T|%r|%S|%N"]
        try:
            reply = self.runner(argv, env=self.env)
        except SlurmError as exc:
            if "Invalid job id" in str(exc):
                return None  # ended longer ago than the controller keeps finished jobs (MinJobAge)
            raise
        return parse_queued(job_id, listing(reply))

    def tick(self, job_id: str) -> Tick | None:
        """The instance the job recorded, from the state view the chain publishes each tick."""
        from watchdogs.scheduler.changes import reader
        from watchdogs.scheduler.records import Records

        try:
            view = reader(self.settings.state_dir)
            if view is None:
                return None
            try:
                row = Records(view).instance_of_job(job_id)
            finally:
                view.close()
        except (WatchdogsError, sqlite3.Error, OSError):
            return None  # not published yet, or being replaced: look again
        if row is None:
            return None
        return Tick(int(row["id"]), str(row["host"] or "?"), float(row["heartbeat"] or row["started"]),
                    row["ended"], row["reason"])

    def log_path(self, job_id: str) -> Path:
        return self.settings.output_dir / f"{self.settings.job_name}-{job_id}.out"

    def ending(self, job_id: str) -> Ending:
        state = exit_code = None
        try:
            record = run_sacct([job_id], SACCT_TIMEOUT_S, self.env, self.runner).get(job_id)
        except SlurmError:
            record = None  # accounting off or busy: the log line still says why
        if record is not None:
            state, exit_code = record.state, record.exit_code
        log = self.log_path(job_id)
        return Ending(state, exit_code, last_line(log), log)


def parse_queued(job_id: str, text: str) -> Queued | None:
    """Pure: the job's line of `squeue --format=%i|%T|%r|%S|%N`, None if it has none."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if not line.strip():
            continue
        if len(parts) != 5:
            raise unparsed("squeue", line)
        if parts[0] == job_id:
            return Queued(*parts[1:])
    return None


def last_line(path: Path) -> str | None:
    """The last non-blank line of the job's output, one line, control characters escaped;
    read only if it is a regular file (a FIFO there must not hang `start`), never through
    a symbolic link at its name."""
    try:
        tail, _size = filekind.read_tail(path, LOG_TAIL_BYTES, follow=False)
    except filekind.NotRegular as exc:
        return f"({exc})"
    except OSError:
        return None
    lines = [ln for ln in tail.decode("utf-8", "replace").splitlines() if ln.strip()]
    return textsafe.one_line(lines[-1].strip(), 300) if lines else None


def watch(job_id: str, looker: Looker, budget: float, python: str | None,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
          ) -> FirstBreath:
    """Look every POLL_S until a verdict or the end of `budget` seconds."""
    deadline = clock() + budget
    while True:
        look = looker.look(job_id)
        verdict = judge(job_id, look, clock() >= deadline)
        if verdict is not None:
            return verdict
        if look.slurm_error is None and (look.job is None or look.tick is not None):
            # It left the queue, or its instance ended, before a tick. A second look at the
            # state catches an instance that ticked just before its job ended.
            tick = look.tick or looker.tick(job_id)
            lived = judge(job_id, Look(None, tick), True)  # None unless that tick is a live one
            return lived or failed(job_id, tick, looker.ending(job_id), python)
        sleep(min(POLL_S, max(0.0, deadline - clock())))
