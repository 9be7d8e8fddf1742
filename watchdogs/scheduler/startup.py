"""What an instance needs before its loop, each with a way through when it fails: the
config (else the last good copy, to say so through its channels), the state database (a
corrupt one moved aside, an unusable directory replaced by a scratch one in memory's
stead), and the watchdog's own news about itself as outcomes.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from watchdogs.alerts import selfalerts
from watchdogs.config import Config, load_config
from watchdogs.config.paths import NOT_ANSWERING
from watchdogs.config.sections import SCHEDULER
from watchdogs.errors import ConfigError, ConfigProblem, WatchdogsError
from watchdogs.fsprobe.answers import SCHEDULER_S, unanswered
from watchdogs.plugins import Registry
from watchdogs.sink import ItemOutcome, ResultSink
from watchdogs.state import lastgood
from watchdogs.state.store import CORRUPT, StateStore, StateUnavailable, open_store, state_problem

if TYPE_CHECKING:
    from watchdogs.scheduler.loop import Scheduler

LOG = logging.getLogger("watchdogs.scheduler")


@dataclass(frozen=True)
class LoadedConfig:
    config: Config | None
    """The config to run with: the file's, else the last good copy (to report), else None."""
    problems: tuple[str, ...] = ()
    """Why the file itself did not load; empty when it did."""
    disabled: dict[str, list[str]] = field(default_factory=dict)
    """Channels left out, with the reasons."""
    source: bytes | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _scheduler_answers(paths: Sequence[Path]) -> frozenset[Path]:
    return unanswered(paths, SCHEDULER_S)


def load(config_path: Path, state_dir: Path, registry: Registry) -> LoadedConfig:
    """The config; a [[notify]] table with problems only disables that channel. When the
    file does not load at all, the last good copy from `state_dir` (or None)."""
    disabled: dict[str, list[ConfigProblem]] = {}
    try:
        source = config_path.expanduser().read_bytes()
        config = load_config(config_path, checks=registry, source=source, broken_channels=disabled,
                             answers=_scheduler_answers)
        return LoadedConfig(config, (), channel_reasons(disabled), source)
    except OSError as exc:
        problems: tuple[str, ...] = (f"{config_path}: cannot read config: {exc.strerror}",)
    except ConfigError as exc:
        problems = tuple(str(p) for p in exc.problems)
    except WatchdogsError as exc:
        problems = (str(exc),)
    if any(NOT_ANSWERING in p for p in problems):  # the last good copy lives there: never read
        return LoadedConfig(None, problems)
    copy = lastgood.load(state_dir)
    if copy is None:
        return LoadedConfig(None, problems)
    disabled = {}
    try:
        config = load_config(config_path, checks=registry, source=copy, broken_channels=disabled,
                             answers=_scheduler_answers)
    except WatchdogsError as exc:
        LOG.error("the last good copy of the config does not load either: %s", exc)
        return LoadedConfig(None, problems)
    return LoadedConfig(config, problems, channel_reasons(disabled), copy)


def channel_reasons(disabled: dict[str, list[ConfigProblem]]) -> dict[str, list[str]]:
    return {name: [_short(p) for p in problems] for name, problems in disabled.items()}


def _short(problem: object) -> str:
    """A config problem of a channel without the file and table (the alert names both)."""
    text = str(problem)
    return text.split(": ", 2)[-1] if text.count(": ") >= 2 else text


def remember(config_path: Path, state_dir: Path, loaded: LoadedConfig) -> None:
    if not loaded.ok or loaded.source is None:
        return
    if not lastgood.save(state_dir, loaded.source):
        LOG.warning("could not keep a copy of the config in %s (used if the config breaks later)", state_dir)
    lastgood.note_state_dir(config_path, state_dir, Path(SCHEDULER["state_dir"].default).expanduser())


@dataclass(frozen=True)
class State:
    store: StateStore
    problem: tuple[str, str] | None = None
    """(kind, detail) when the real state directory cannot be used and `store` is a scratch one."""
    note: str | None = None
    """A corrupt database was moved aside: what to tell people."""


def open_state(state_dir: Path) -> State:
    """The state database in `state_dir`; a corrupt one is moved aside (and said). When the
    directory cannot hold one (full, read-only), a private scratch directory stands in so
    the checks still run, and the problem is said at once."""
    try:
        store, note = open_store(state_dir, check=True)
        return State(store, None, note)
    except StateUnavailable as exc:
        scratch = scratch_dir()
        LOG.error("%s: running on a scratch state in %s until it can be written", exc, scratch)
        store, _ = open_store(scratch)
        return State(store, (exc.kind, exc.detail), None)


def tell_state(config: Config, state: State, sink: ResultSink) -> None:
    """`run --once` too tells the channels, not only stderr, when the state database was
    corrupt (moved aside: what was kept and lost) or the folder cannot be used."""
    if state.note is None and state.problem is None:
        return
    kind, detail = state.problem or (CORRUPT, state.note or "")
    LOG.error("state directory %s: %s", kind, detail)
    now = datetime.now(timezone.utc)
    channels = [n.name for n in config.notifiers]
    sink.handle([selfalerts.state_broken(kind, detail, str(config.scheduler.state_dir), now, channels)], now)


def publish_view(store: StateStore, writer: str) -> None:
    """The read-only view other hosts read (watchdogs.state.snapshot); best effort."""
    from watchdogs.state import snapshot

    try:
        snapshot.publish(store, writer)
    except Exception as exc:
        if state_problem(exc) is None and not isinstance(exc, OSError):
            raise
        LOG.warning("cannot write the state view: %s", exc)


SCRATCH_PREFIX = "watchdogs-state-"


def scratch_dir() -> Path:
    """A private scratch state folder named for this process, so that the instance removes
    it at its end (`remove_scratch`) and the next one sweeps it after a SIGKILL."""
    return Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))


def remove_scratch(own_only: bool = True) -> int:
    """Remove this process's scratch folders, and those of processes of ours that are gone."""
    removed = 0
    base = Path(tempfile.gettempdir())
    try:
        entries = list(base.glob(f"{SCRATCH_PREFIX}*"))
    except OSError:
        return 0
    for entry in entries:
        pid = entry.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or entry.lstat().st_uid != os.getuid() or not entry.is_dir():
                continue
            if int(pid) != os.getpid() and (own_only or psutil.pid_exists(int(pid))):
                continue
            shutil.rmtree(entry)
            removed += 1
        except OSError as exc:
            LOG.warning("cannot remove the scratch state %s: %s", entry, exc)
    return removed



def news(loaded: LoadedConfig, config: Config, working: list[str], disabled: dict[str, list[str]],
         now: datetime) -> list[ItemOutcome]:
    """The watchdog's own outcomes at start: its config, and each channel's fate."""
    outcomes = [selfalerts.config_ok(now, working) if loaded.ok
                else selfalerts.config_broken(list(loaded.problems), str(config.path), now, working)]
    for name in sorted(disabled):
        outcomes.append(selfalerts.channel_disabled(name, disabled[name], now, working))
    for name in working:
        outcomes.append(selfalerts.channel_ok(name, now, working))
    return outcomes


class StoreSwitch:
    """Moves the scheduler between the real state database and a scratch one as the state
    directory fails and recovers (told by the sink's probe and by failed writes)."""

    def __init__(self, state_dir: Path, state: State) -> None:
        self.state_dir = state_dir
        self.real: StateStore | None = state.store if state.problem is None else None
        self.scratch: StateStore | None = state.store if state.problem is not None else None
        self.target: Scheduler | None = None

    def __call__(self, kind: str | None, detail: str) -> None:
        if self.target is None:
            return
        try:
            if kind is None:
                if self.real is None:
                    self.real, _ = open_store(self.state_dir)
                self.target.use_store(self.real)
                LOG.warning("back on the state database in %s", self.state_dir)
            else:
                if self.scratch is None:
                    self.scratch, _ = open_store(scratch_dir())
                self.target.use_store(self.scratch)
                LOG.warning("state directory %s: carrying on with a scratch state in %s", kind,
                            self.scratch.state_dir)
        except WatchdogsError as exc:
            LOG.error("cannot switch the state database: %s", exc)


class ConfigWatch:
    """A config edited while an instance runs is tried at once (on the next tick after it
    changed), so a syntax error left at night is said now, not when the next instance
    fails to start. The running instance keeps the config it loaded."""

    def __init__(self, config_path: Path, state_dir: Path, registry: Registry,
                 say: Callable[[list[ItemOutcome]], None], channels: Callable[[], list[str]]) -> None:
        self.config_path = config_path
        self.state_dir = state_dir
        self.registry = registry
        self.say = say
        self.channels = channels
        self.seen = self._stamp()

    def _stamp(self) -> tuple[float, int] | None:
        try:
            info = self.config_path.stat()
        except OSError:
            return None
        return info.st_mtime, info.st_size

    def __call__(self, now: float) -> None:
        stamp = self._stamp()
        if stamp == self.seen:
            return
        self.seen = stamp
        loaded = load(self.config_path, self.state_dir, self.registry)
        when = datetime.fromtimestamp(now, timezone.utc)
        if loaded.ok:
            LOG.info("%s changed and loads; the next instance runs with it", self.config_path)
            self.say([selfalerts.config_ok(when, self.channels())])
        else:
            LOG.error("%s changed and does not load:\n  %s", self.config_path, "\n  ".join(loaded.problems))
            self.say([selfalerts.config_broken(list(loaded.problems), str(self.config_path), when,
                                               self.channels(), running=True)])
