"""An alert store that fails for a reason that is not the disk (a bug of ours) loses no alert:
the results of that tick go out directly from memory, with a CRITICAL about the watchdog
itself, and an OK once the store takes results again. The fault is injected (a bug cannot be
made for real); the channel, the file it writes and the database are real."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.checks.conftest import write_config
from watchdogs.alerts import build_guarded_sink
from watchdogs.alerts.sink import AlertSink
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore


def failing(item: str, now: datetime) -> ItemOutcome:
    result = CheckResult(Status.CRITICAL, "disk on fire", fingerprint="f1")
    return ItemOutcome(item, "dropin", result, now, now, after=1)


def test_a_tick_the_alert_store_cannot_take_is_sent_from_memory_and_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "alerts.log"
    cfg = write_config(tmp_path, f'[[notify]]\nname = "file"\ntype = "logfile"\npath = "{log}"\n')
    sink, _ = build_guarded_sink(cfg, StateStore(cfg.scheduler.state_dir))
    now = datetime.now(timezone.utc)
    real_handle = AlertSink.handle

    def broken(self: AlertSink, outcomes: object, when: datetime) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(AlertSink, "handle", broken)
    sink.handle([failing("cron.hourly/disk", now)], now)
    sink.flush(now, force=True)
    text = log.read_text()
    assert "cron.hourly/disk" in text and "disk on fire" in text, text
    assert "watchdogs could not record 1 check result(s) in its alert store (KeyError: 'a bug')" in text, text

    monkeypatch.setattr(AlertSink, "handle", real_handle)
    sink.handle([failing("cron.hourly/other", now)], now)
    sink.flush(now, force=True)
    text = log.read_text()
    assert "the alert store records check results again" in text, text
    assert "cron.hourly/other" in text, text
