"""How a starting chain instance takes over from the one still running, before it touches
the state database.

A *next* starts while its predecessor still watches (that is its point: no gap). It asks
the predecessor to hand over with the same signal the time limit sends
(`scancel --batch --signal=USR1`), then waits until Slurm no longer lists it at all: its
process is gone, so the database has one writer again, on any filesystem (flock may be
local to one host on NFS; Slurm's view is not). Only then does it open the database.

A *rescue* that starts while another instance already runs lost the race to a next: it
ends at once ("superseded", a healthy end that does not count towards a crash loop).

Why a signal and not a file in the state folder: another host's NFS client may not see a
new file for up to `acdirmax`, and a signal needs no new trust boundary.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from watchdogs.errors import WatchdogsError
from watchdogs.scheduler import chain
from watchdogs.scheduler.stopflag import HANDOVER_GRACE_S
from watchdogs.slurmctl.runner import SlurmRunner, run_slurm

LOG = logging.getLogger("watchdogs.scheduler")
HANDOVER_WAIT_S = HANDOVER_GRACE_S + 30.0
"""How long a newcomer waits for its predecessor to finish its item in progress and exit."""
GONE_WAIT_S = 30.0
"""After scancel of a predecessor that did not hand over: how long until Slurm lets it go."""
POLL_S = 1.0
"""How often the newcomer looks at the queue while it waits (one squeue each time)."""

Action = Literal["take over", "ask predecessor", "superseded"]


@dataclass(frozen=True)
class Decision:
    action: Action
    others: tuple[chain.ChainJob, ...]
    """The instances still live that must be gone before the state is opened."""
    why: str
    cancel: tuple[str, ...] = ()
    """The rescues of the instances this one replaces: a rescue that starts once they end
    would only find this instance running and leave."""


def decide(me: str, jobs: Sequence[chain.ChainJob]) -> Decision:
    """Pure: what a starting instance `me` does, from one squeue of the chain's jobs."""
    own = next((j for j in jobs if j.id == me), None)
    role = own.role if own is not None else "start"
    live = tuple(j for j in jobs if j.id != me and j.state != "PENDING")
    if not live:
        return Decision("take over", (), "no other instance is live")
    running = [j for j in live if j.state in ("RUNNING", "CONFIGURING")]
    if role == "rescue" and running:
        # A rescue starts only after its predecessor ended: one running now took over already.
        return Decision("superseded", tuple(running), f"superseded: job {running[0].id} watches")
    ending = {j.id for j in live}
    rescues = tuple(j.id for j in jobs
                    if j.state == "PENDING" and j.role == "rescue" and j.predecessor in ending)
    if not running:
        return Decision("take over", live, "the previous instance is ending: "
                        + ", ".join(f"job {j.id} ({j.state})" for j in live), rescues)
    return Decision("ask predecessor", live, "asking " + ", ".join(f"job {j.id}" for j in running)
                    + " to hand over", rescues)


@dataclass(frozen=True)
class Outcome:
    go_on: bool
    why: str


def take_over(settings: chain.ChainSettings, me: str, env: Mapping[str, str],
              runner: SlurmRunner = run_slurm, clock: Callable[[], float] = time.monotonic,
              pause: Callable[[float], None] = time.sleep) -> Outcome:
    """Decide, ask, and wait until no other instance is live. `go_on` False: this instance
    ends now (superseded)."""
    try:
        decision = decide(me, chain.chain_jobs(settings.job_name, env, runner))
    except WatchdogsError as exc:
        # Slurm cannot be asked: the state lock alone arbitrates (as before this protocol).
        LOG.warning("handover: cannot list the chain's jobs (%s); the state lock decides", exc)
        return Outcome(True, "unknown")
    if decision.action == "superseded":
        return Outcome(False, decision.why)
    if not decision.others:
        return Outcome(True, decision.why)
    LOG.info("handover: %s", decision.why)
    if decision.cancel:
        _cancel_rescues(decision.cancel, env, runner)
    if decision.action == "ask predecessor":
        _ask(decision.others, env, runner)
    if _wait_gone(settings, me, env, runner, clock, pause, HANDOVER_WAIT_S):
        return Outcome(True, "handed over")
    wedged = [j.id for j in decision.others]
    LOG.error("handover: job %s did not hand over within %.0fs: cancelling it", ", ".join(wedged),
              HANDOVER_WAIT_S)
    try:
        chain.cancel(wedged, env, runner)
    except WatchdogsError as exc:
        LOG.error("handover: cannot cancel %s: %s", ", ".join(wedged), exc)
    if _wait_gone(settings, me, env, runner, clock, pause, GONE_WAIT_S):
        return Outcome(True, "took over from a wedged instance")
    return Outcome(False, f"superseded: job {', '.join(wedged)} would not end; this instance leaves it")


def _cancel_rescues(jobs: Sequence[str], env: Mapping[str, str], runner: SlurmRunner) -> None:
    try:
        chain.cancel(jobs, env, runner)
    except WatchdogsError as exc:  # it would start, see this instance, and leave: no harm
        LOG.warning("handover: cannot cancel the predecessor's rescue %s: %s", ", ".join(jobs), exc)


def _ask(others: Sequence[chain.ChainJob], env: Mapping[str, str], runner: SlurmRunner) -> None:
    """USR1 to the predecessor's batch process (the instance itself: the script exec's it)."""
    for job in others:
        if job.state not in ("RUNNING", "CONFIGURING"):
            continue
        try:
            runner(["scancel", "--batch", "--signal=USR1", job.id], env=env)
        except WatchdogsError as exc:
            LOG.error("handover: cannot ask job %s to hand over: %s", job.id, exc)


def _wait_gone(settings: chain.ChainSettings, me: str, env: Mapping[str, str], runner: SlurmRunner,
               clock: Callable[[], float], pause: Callable[[float], None], limit: float) -> bool:
    """True once Slurm lists no live instance but `me` (COMPLETING counts as live: its
    process may still write during KillWait)."""
    deadline = clock() + limit
    while True:
        try:
            jobs = chain.chain_jobs(settings.job_name, env, runner)
        except WatchdogsError as exc:
            LOG.warning("handover: squeue: %s", exc)
            jobs = None
        if jobs is not None and not [j for j in jobs if j.id != me and j.state != "PENDING"]:
            return True
        if clock() >= deadline:
            return False
        pause(POLL_S)
