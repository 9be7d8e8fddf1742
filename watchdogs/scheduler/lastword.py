"""The last word: an instance ended by anything but `watchdogs stop` (scancel, a drain, a
preemption, a signal nobody expected) says so once, CRITICAL, before Slurm's KillWait runs
out: who or what ended it, whether a successor is still queued (a queued next is released
to start now), and the one command that restarts the chain. The dead man's switch gets
`/fail` with the same words: the blindness is known before it starts.

It runs from the loop's shutdown *before* the items in progress are waited for, and within
BUDGET_S in all: what the channels cannot take in time stays in the outbox, and the next
instance delivers it (late). A SIGKILL (OOM, a dead node) leaves no time for a word: the
rescue successor and the dead man's switch cover those.
"""
from __future__ import annotations

import logging
import pwd
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from watchdogs.alerts import selfalerts
from watchdogs.errors import WatchdogsError
from watchdogs.scheduler import chain
from watchdogs.scheduler.deadman import DeadMansSwitch
from watchdogs.sink import ResultSink
from watchdogs.slurmctl.runner import SlurmReply, SlurmRunner, run_slurm

LOG = logging.getLogger("watchdogs.scheduler")
T = TypeVar("T")
ASK_S = 1.5
"""How long Slurm may take to say what ended this job and what is queued."""
BUDGET_S = 2.5
"""The whole last word: Slurm's answers and the delivery. Well inside a KillWait of 5 s (the
dev cluster's; 30 s is Slurm's default) with the drain that follows."""


def restart_command(config_path: Path) -> str:
    return f"watchdogs --config {shlex.quote(str(config_path))} start"


def who_ended(state: str | None, reason: str) -> str:
    """"was cancelled by alice (uid 1001, scancel)" from sacct's "CANCELLED by 1001", else
    what the signal says."""
    words = (state or "").split()
    if len(words) == 3 and words[0] == "CANCELLED" and words[1] == "by" and words[2].isdigit():
        uid = int(words[2])
        try:
            name = f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
        except KeyError:
            name = f"uid {uid}"
        return f"was cancelled by {name} (scancel, or an administrator's action)"
    if words and words[0] not in ("RUNNING", "COMPLETING", "PENDING"):
        return f"was ended by Slurm: {words[0]} ({reason})"
    if "SIGTERM" in reason:
        return f"was {reason} (scancel, a preemption, a drain or a node shutdown)"
    return reason if reason.startswith("ended") else f"was {reason}"


def successor_words(jobs: Sequence[chain.ChainJob], own: str | None
                    ) -> tuple[str | None, chain.ChainJob | None]:
    """("successor job 12 is queued (PENDING, Priority)", the next to release), or (None, None)."""
    pending = [j for j in jobs if j.id != own and j.state == "PENDING"]
    if not pending:
        return None, None
    nxt = next((j for j in pending if j.role == "next"), None)
    first = nxt or pending[0]
    return f"successor job {first.id} is queued (PENDING, {first.reason})", nxt


class LastWord:
    def __init__(self, settings: chain.ChainSettings, job_id: str | None, sink: ResultSink,
                 channels: Callable[[], Sequence[str]], switch: DeadMansSwitch,
                 env: Mapping[str, str], runner: SlurmRunner = run_slurm,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.job_id = job_id
        self.sink = sink
        self.channels = channels
        self.switch = switch
        self.env = env
        self.runner = runner
        self.clock = clock
        self.said: str | None = None
        """The words, once said (for the end record and the blind record)."""

    def __call__(self, reason: str) -> None:
        if self.settings.stop_file.exists():
            LOG.info("stopped on purpose (the stop file exists): no last word")
            return
        deadline = time.monotonic() + BUDGET_S
        state, jobs = self._ask_slurm()
        what = f"(job {self.job_id}) {who_ended(state, reason)}" if self.job_id else who_ended(None, reason)
        queued, nxt = successor_words(jobs, self.job_id)
        if nxt is not None and self._release(nxt.id):
            queued = f"{queued} and was released to start now"
        restart = restart_command(self.settings.config_path)
        if not self.job_id:
            restart = f"watchdogs --config {shlex.quote(str(self.settings.config_path))} run"
            queued = None
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        found = selfalerts.chain_ended(what, queued, restart, now, list(self.channels()))
        self.said = found.result.summary
        LOG.critical("%s", self.said)
        self.switch.fail(self.said)
        self.sink.handle([found], now)
        sending = threading.Thread(target=self._flush, args=(now,), name="last word", daemon=True)
        sending.start()
        sending.join(max(0.5, deadline - time.monotonic()))
        if sending.is_alive():
            LOG.warning("the last word is still being sent; what is not sent stays in the outbox")

    def _ask_slurm(self) -> tuple[str | None, list[chain.ChainJob]]:
        """sacct's state of this job ("CANCELLED by 1001") and the chain's live jobs, asked
        side by side within ASK_S; what does not answer in time is left out."""
        if not self.job_id:
            return None, []
        pool = ThreadPoolExecutor(2, thread_name_prefix="last word")
        state = pool.submit(self._sacct_state, self.job_id)
        jobs = pool.submit(chain.chain_jobs, self.settings.job_name, self.env, self._quick)
        pool.shutdown(wait=False)  # each call is bounded by its own timeout; never wait past ours
        return _result(state, None), _result(jobs, [])

    def _quick(self, argv: Sequence[str], timeout: float = ASK_S, env: Mapping[str, str] | None = None,
               input_text: str | None = None) -> SlurmReply:
        return self.runner(argv, min(timeout, ASK_S), env, input_text)

    def _sacct_state(self, job_id: str) -> str | None:
        reply = self._quick(["sacct", "--noheader", "--allocations", f"--jobs={job_id}", "--format=State%40"],
                            env=self.env)
        return next((line.strip() for line in reply.stdout.splitlines() if line.strip()), None)

    def _release(self, job_id: str) -> bool:
        try:
            chain.release_now(job_id, self.env, self.runner, timeout=ASK_S)
        except WatchdogsError as exc:
            LOG.error("cannot release the next instance %s to start now: %s", job_id, exc)
            return False
        return True

    def _flush(self, now: datetime) -> None:
        try:
            self.sink.flush(now, force=True)
        except Exception:
            LOG.exception("the last word could not be sent")


def _result(future: Future[T], default: T) -> T:
    try:
        return future.result(timeout=ASK_S + 0.5)
    except (WatchdogsError, TimeoutError) as exc:
        LOG.warning("last word: Slurm did not say: %s", exc)
        return default
