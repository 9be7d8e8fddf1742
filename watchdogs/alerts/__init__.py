"""Alert lifecycle and delivery (flip detection, routing, grouping, silences, outbox).

`build_sink(config, store)` is the one function the scheduler calls.
"""
from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Sequence

from watchdogs.sink import ItemOutcome, ResultSink

if TYPE_CHECKING:
    from watchdogs.config import Config
    from watchdogs.state.store import StateStore

LOG = logging.getLogger("watchdogs.alerts")


class LogOnlySink:
    """Placeholder until the alert lifecycle lands: logs non-OK outcomes."""

    def handle(self, outcomes: Sequence[ItemOutcome], now: datetime) -> None:
        for outcome in outcomes:
            if outcome.result.status.name != "OK":
                LOG.warning("%s %s: %s", outcome.item, outcome.result.status.name, outcome.result.summary)

    def flush(self, now: datetime, force: bool = False) -> None:
        return None


def build_sink(config: "Config", store: "StateStore") -> ResultSink:
    return LogOnlySink()
