"""Alert lifecycle and delivery (flip detection, routing, grouping, silences, outbox).

`build_sink(config, store)` is the one function the scheduler calls; `summary(store)` is
what a status command may show (counts only, never a secret).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


def summary(store: StateStore) -> dict[str, Any]:
    """Open alerts and undelivered messages, for `watchdogs status`."""
    from watchdogs.alerts import schema

    db = schema.ensure(store).connection()
    open_alerts = db.execute("SELECT COUNT(*) FROM alert_state WHERE notified != 'OK'").fetchone()[0]
    pending = db.execute("SELECT COUNT(*) FROM outbox WHERE delivered IS NULL").fetchone()[0]
    failing = [r[0] for r in db.execute("SELECT channel FROM channel_health WHERE failing_since IS NOT NULL")]
    return {"open_alerts": open_alerts, "outbox_pending": pending, "failing_channels": failing}
