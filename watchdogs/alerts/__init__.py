"""Alert lifecycle and delivery (flip detection, routing, grouping, silences, outbox).

`build_sink(config, store)` is the one function the scheduler calls; `summary(store)` is
what a status command may show (counts only, never a secret).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchdogs.alerts.guarded import GuardedSink
    from watchdogs.config import Config
    from watchdogs.sink import ResultSink
    from watchdogs.state.store import StateStore


def build_sink(config: Config, store: StateStore) -> ResultSink:
    """The real sink: every enabled [[notify]] channel, secrets checked (and complained
    about in the log) now rather than at the first alert."""
    from watchdogs.alerts.channels import build_channels, preflight
    from watchdogs.alerts.sink import AlertSink

    channels = build_channels(config)
    preflight(channels)
    return AlertSink(config, store, channels)


def build_guarded_sink(config: Config, store: StateStore | None, *,
                       disabled: Mapping[str, list[str]] | None = None,
                       on_change: Callable[[str | None, str], None] | None = None,
                       problem: tuple[str, str] | None = None) -> tuple[GuardedSink, dict[str, list[str]]]:
    """The scheduler's sink: every channel that works (the others disabled, returned with
    their reasons), durable while the state directory works (`store`; None when it could
    not be opened: `problem` says why), direct from memory while it does not."""
    import os
    import socket

    from notifiers.render import Templates
    from watchdogs.alerts.channels import build_working_channels
    from watchdogs.alerts.direct import DirectSink
    from watchdogs.alerts.events import cli_for
    from watchdogs.alerts.guarded import GuardedSink
    from watchdogs.alerts.sink import AlertSink
    from watchdogs.slurmctl.clustername import cluster_name
    from watchdogs.state.store import open_store, state_problem

    channels, broken = build_working_channels(config, disabled)
    templates = Templates(config.alerts.templates)
    host = socket.gethostname()

    def reopen() -> AlertSink:
        fresh, _ = open_store(config.scheduler.state_dir)
        return AlertSink(config, fresh, channels, templates, host)

    stored = None
    if store is not None:
        try:
            stored = AlertSink(config, store, channels, templates, host)
        except Exception as exc:
            kind = state_problem(exc)
            if kind is None:
                raise
            problem = problem or (kind, str(exc))
    direct = DirectSink(config.alerts, channels, templates,
                        stored.cluster if stored else cluster_name(config.alerts.cluster, host), host,
                        cli=cli_for(str(config.path), os.environ.get("WATCHDOGS_CONFIG")))
    return GuardedSink(stored, direct, Path(config.scheduler.state_dir), reopen=reopen,
                       on_change=on_change, problem=problem), broken


def summary(store: StateStore) -> dict[str, Any]:
    """Open alerts and undelivered messages, for `watchdogs status`."""
    from watchdogs.alerts import schema

    db = schema.ensure(store).connection()
    open_alerts = db.execute("SELECT COUNT(*) FROM alert_state WHERE notified != 'OK'").fetchone()[0]
    pending = db.execute("SELECT COUNT(*) FROM outbox WHERE delivered IS NULL").fetchone()[0]
    failing = [r[0] for r in db.execute("SELECT channel FROM channel_health WHERE failing_since IS NOT NULL")]
    return {"open_alerts": open_alerts, "outbox_pending": pending, "failing_channels": failing}
