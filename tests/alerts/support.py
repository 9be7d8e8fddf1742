"""Helpers for the alert-lifecycle tests: outcomes, a sink from TOML, reading results."""
from __future__ import annotations

import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from watchdogs.alerts import build_sink
from watchdogs.alerts.sink import AlertSink
from watchdogs.config import load_config
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def outcome(item: str, status: Status, when: datetime = T0, summary: str | None = None,
            **kw: Any) -> ItemOutcome:
    context = kw.pop("context", {"partition": "debug"})
    result = CheckResult(status, summary or f"{item} is {status.name}", ("a detail",), context=context)
    return ItemOutcome(item, kw.pop("kind", "check"), result, when, when, **kw)


def make_sink(tmp_path: Path, text: str) -> AlertSink:
    path = tmp_path / "watchdogs.toml"
    path.write_text('[scheduler]\nstate_dir = "state"\n' + textwrap.dedent(text))
    config = load_config(path)
    sink = build_sink(config, StateStore(config.scheduler.state_dir))
    assert isinstance(sink, AlertSink)
    return sink


def logfile(name: str) -> str:
    return f'[[notify]]\nname = "{name}"\ntype = "logfile"\npath = "{name}.log"\n'


def lines(tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / f"{name}.log"
    return path.read_text().splitlines() if path.exists() else []


def outbox(sink: AlertSink, pending_only: bool = False) -> list[dict[str, Any]]:
    query = "SELECT * FROM outbox" + (" WHERE delivered IS NULL" if pending_only else "") + " ORDER BY id"
    return [dict(r) for r in sink.store.connection().execute(query)]
