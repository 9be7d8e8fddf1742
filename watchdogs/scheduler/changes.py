"""How a command changes the state (silence, ack, resolve, ending a silence), and how the
read-only commands find it, on any shared filesystem (docs/state.md).

- The chain runs (its view has a fresh heartbeat): the change is queued as a command file
  and the chain applies it within a second or so; we wait for its answer and print it.
- No chain runs, and the state folder's locks work across hosts: we take the scheduler
  lock, apply the change ourselves, publish a new view, let go.
- Otherwise (locks on one host only, or none; or the lock is held): the change stays
  queued, and we say so: it is applied when the chain next runs.
Never silently ignored: the answer is "applied", or "queued" with when it will apply.
"""
from __future__ import annotations

import contextlib
import getpass
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdogs.config import Config
from watchdogs.errors import WatchdogsError
from watchdogs.scheduler.records import Records
from watchdogs.state import snapshot
from watchdogs.state.store import DB_NAME, StateStore, StateUnavailable, open_store, state_problem
from watchdogs.textsafe import one_line

if TYPE_CHECKING:
    from watchdogs.state import inbox

WAIT_FLOOR_S = 10.0
"""The least time a command waits for the chain's answer (it looks every second)."""


@dataclass(frozen=True)
class Chain:
    alive: bool
    where: str
    heartbeat_age: float | None


def reader(state_dir: Path) -> StateStore | None:
    """What the read-only commands read: the view the writer publishes; a database from
    before views, read in place; or None when nothing was recorded. A database written
    after its view by a process that publishes none (an older version's scheduler) is read
    in place too, when its view shows no scheduler alive."""
    try:
        view = snapshot.open_view(state_dir)
    except StateUnavailable:
        view = None
    if view is None:
        return snapshot.legacy_store(state_dir)
    info = view.info()
    if info is not None and _written_since(state_dir, info.taken) and not _alive_in(view):
        legacy = snapshot.legacy_store(state_dir)
        if legacy is not None:
            view.close()
            return legacy
    return view


def _written_since(state_dir: Path, taken: float) -> bool:
    newest = 0.0
    for name in (DB_NAME, f"{DB_NAME}-wal"):
        with contextlib.suppress(OSError):
            newest = max(newest, (Path(state_dir) / name).stat().st_mtime)
    return newest > taken + 1.0


def _alive_in(view: StateStore) -> bool:
    try:
        latest = Records(view).latest_instance()
    except Exception as exc:
        if state_problem(exc) is None and "no such table" not in str(exc):
            raise
        return False
    return latest is not None and latest["ended"] is None


def chain_state(config: Config, view: StateStore | None, now: float) -> Chain:
    if view is None:
        return Chain(False, "no scheduler has run here", None)
    try:
        latest = Records(view).latest_instance()
    except Exception as exc:
        if state_problem(exc) is None and "no such table" not in str(exc):
            raise
        latest = None
    if latest is None:
        return Chain(False, "no scheduler has run here", None)
    where = f"job {latest['job_id']}" if latest["job_id"] else f"pid {latest['pid']}"
    where += f" on {latest['host']}"
    age = now - float(latest["heartbeat"] or latest["started"])
    alive = latest["ended"] is None and age <= config.scheduler.heartbeat_stale
    return Chain(alive, where, age)


def owned_elsewhere(config: Config) -> str | None:
    """Why this process must not open the live database: a scheduler alive on another host
    owns it (WAL works on one host only). None when it may."""
    import socket

    state_dir = Path(config.scheduler.state_dir)
    try:
        view = snapshot.open_view(state_dir)
    except StateUnavailable:
        return None
    if view is None:
        return None
    try:
        latest = Records(view).latest_instance()
    except Exception as exc:
        if state_problem(exc) is None and "no such table" not in str(exc):
            raise
        return None
    finally:
        view.close()
    chain = chain_state(config, view, time.time()) if latest else None
    if latest is None or chain is None or not chain.alive or latest["host"] == socket.gethostname():
        return None
    return f"the scheduler ({chain.where}) owns the state database in {state_dir}"


def whoami() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def change(config: Config, verb: str, args: dict[str, Any]) -> tuple[inbox.Outcome | None, str]:
    """Apply or queue one change. Returns (the outcome when applied, else None; how)."""
    # Here, not above: `status` reads through this module and needs none of the write path.
    import os
    import socket

    from watchdogs.scheduler.lock import Lock
    from watchdogs.state import inbox, locking

    state_dir = Path(config.scheduler.state_dir)
    now = time.time()
    chain = chain_state(config, reader(state_dir), now)
    try:
        command = inbox.submit(state_dir, verb, args, whoami(), now)
    except OSError as exc:
        raise WatchdogsError(f"cannot queue the {verb} in {inbox.folder(state_dir)}: {exc.strerror or exc}; "
                             "nothing was changed") from None
    if chain.alive:
        done = inbox.wait(state_dir, command, max(WAIT_FLOOR_S, 2 * config.scheduler.tick))
        if done is not None:
            return done, f"applied by the {done.applied_by}"
        return None, (f"queued as {command.name}: the scheduler ({chain.where}, heartbeat "
                      f"{chain.heartbeat_age or 0:.0f}s ago) has not applied it yet; it will at its "
                      "next look")
    locks = locking.probe(state_dir)
    if not locks.across_hosts:
        return None, (f"queued as {command.name}: no scheduler is running ({chain.where}), and "
                      f"{locks.note}, so this command does not write the database itself: the "
                      "scheduler applies it when it starts (`watchdogs start`)")
    lock = Lock(state_dir)
    holder = lock.acquire(f"command {verb} (pid {os.getpid()} on {socket.gethostname()})")
    if holder:
        done = inbox.wait(state_dir, command, WAIT_FLOOR_S)
        if done is not None:
            return done, f"applied by the {done.applied_by}"
        return None, (f"queued as {command.name}: the state is held by {holder}; it is applied at its "
                      "next look")
    try:
        _apply_here(config, state_dir)
    finally:
        lock.release()
    done = inbox.result(state_dir, command)
    return done, "applied directly (no scheduler is running)"


def _apply_here(config: Config, state_dir: Path) -> None:
    import os

    from watchdogs.scheduler.inbox import apply_pending

    store, note = open_store(state_dir, check=True)
    try:
        if note is not None:
            _tell_corrupt(config, store, note)
        Records(store)  # the view must hold the scheduler's tables too
        made = apply_pending(store, state_dir, f"`watchdogs` command (pid {os.getpid()})", time.time(),
                             quiet=True)
        if made:
            _send(config, store, made)
        snapshot.publish(store, "a command (no scheduler running)")
    finally:
        store.close()


def _tell_corrupt(config: Config, store: StateStore, note: str) -> None:
    """This command found the database corrupt and started a fresh one: the channels hear
    it (with what was kept and lost), as they would from the scheduler."""
    from datetime import datetime, timezone

    from watchdogs.alerts import selfalerts
    from watchdogs.state.store import CORRUPT

    now = datetime.now(timezone.utc)
    channels = [n.name for n in config.notifiers]
    told = selfalerts.state_broken(CORRUPT, note, str(config.scheduler.state_dir), now, channels)
    _send(config, store, [told])


def _send(config: Config, store: StateStore, outcomes: list[Any]) -> None:
    """Resolutions applied without a scheduler: told now, through the usual lifecycle."""
    from datetime import datetime, timezone

    from watchdogs.alerts import build_sink

    sink = build_sink(config, store)
    now = datetime.now(timezone.utc)
    sink.handle(outcomes, now)
    sink.flush(now)


def describe(done: inbox.Outcome | None, how: str) -> tuple[str, int]:
    """Text and exit code: an error the writer found is an error here too."""
    if done is None:
        return how, 0
    # The answer quotes what the sender wrote (a reason, an item pattern) and ids from the
    # database: one line by construction, so a line break in them is shown, never obeyed
    # (a reason "x\nCRITICAL ..." must not forge a line of the answer).
    text = one_line(done.text)
    if not done.ok:
        raise WatchdogsError(text)
    return f"{text}\n({how})", 0
