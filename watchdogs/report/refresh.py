"""The scheduler's copy of the page: `<state_dir>/report.html`, rewritten by a chore of the
scheduler loop (each tick, at most once a minute), with the template compiled once for the
instance's life."""
from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2

    from watchdogs.config.model import Config
    from watchdogs.state.store import StateStore

LOG = logging.getLogger("watchdogs.report")
PAGE = "report.html"
EVERY_S = 60.0
TICKS = 6


def refresh_every(tick: float) -> float:
    """Every TICKS ticks, at most EVERY_S apart, at least one tick: a minute with the default
    10-second tick. The page reads a week of run history, about 0.1 s of CPU for a busy
    week (benchmarks/report_tick.py): too much for every tick, and more often than anyone
    reads it."""
    return max(tick, min(EVERY_S, TICKS * tick))


def page_path(config: Config) -> Path:
    return config.scheduler.state_dir / PAGE


class PageRefresher:
    """Called with the tick's time. A page that cannot be written (full or read-only state
    folder) is said once in the log, and again once it can be written: the state folder's
    own problems are alerted on by the scheduler, and the page is no reason to stop a tick."""

    def __init__(self, config: Config, store: StateStore) -> None:
        self.config = config
        self.store = store
        self.out = page_path(config)
        self.every = refresh_every(config.scheduler.tick)
        self._env: jinja2.Environment | None = None
        self._failing = False
        self._written: float | None = None

    def __call__(self, now: float) -> None:
        """Called each tick; writes at the first and then every `self.every` seconds."""
        from watchdogs.report import data, html

        if self._written is not None and now - self._written < self.every:
            return
        self._written = now
        try:
            if self._env is None:
                self._env = html.environment()
            html.write(data.gather(self.config, self.store, now), self.out, self._env)
        except (OSError, sqlite3.Error) as exc:
            if not self._failing:
                LOG.warning("cannot refresh the status page %s: %s", self.out, exc)
            self._failing = True
            return
        if self._failing:
            LOG.info("the status page %s is refreshed again", self.out)
        self._failing = False
