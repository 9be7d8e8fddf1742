"""Shared helpers: a config from TOML text (through the real loader), events and batches."""
from __future__ import annotations

import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

from notifiers.base import Message, Notifier
from notifiers.render import Templates
from watchdogs.alerts.channels import build_notifier
from watchdogs.alerts.events import AlertEvent, Batch
from watchdogs.config import Config, load_config
from watchdogs.result import Status

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def config(tmp_path: Path, text: str, name: str = "watchdogs.toml") -> Config:
    path = tmp_path / name
    path.write_text('[scheduler]\nstate_dir = "state"\n' + textwrap.dedent(text))
    return load_config(path)


def channel(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Notifier:
    """The one [[notify]] channel of `text`."""
    cfg = config(tmp_path, text)
    return build_notifier(cfg.notifiers[0], env=env)


def event(item: str = "train-job", status: str = "CRITICAL", state: str = "alert",
          summary: str = "job 4242 FAILED (exit 1)", **kw: object) -> AlertEvent:
    values: dict[str, object] = {"item": item, "state": state, "status": status, "previous": "OK",
                                 "summary": summary, "since": T0 - timedelta(minutes=7), "at": T0,
                                 "context": {"job": "4242", "partition": "debug"},
                                 "details": ("slurmstepd: error: Detected 1 oom_kill event",),
                                 "runbook": "https://wiki.example.org/runbooks/oom"}
    values.update(kw)
    # Tests name statuses as text ("WARNING"); the event carries the Status itself.
    values["status"], values["previous"] = Status[str(values["status"])], Status[str(values["previous"])]
    return AlertEvent(**values)  # type: ignore[arg-type]  # why: keyword values checked by AlertEvent


def batch(*events: AlertEvent, channel: str = "ch", key: str = "wd-test-key-0001") -> Batch:
    return Batch(channel, tuple(events) or (event(),), T0, "cl1", "login1", key)


def render(notifier: Notifier, *events: AlertEvent, user_dir: Path | None = None) -> Message:
    return notifier.render(batch(*events, channel=notifier.name), Templates(user_dir))
