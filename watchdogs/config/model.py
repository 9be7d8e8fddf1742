"""The validated, typed, immutable configuration."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any


def frozen_map(values: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class SchedulerSettings:
    """[scheduler]: where state lives, how often it ticks, its own job and heartbeat."""

    state_dir: Path
    cron_dir: Path
    tick: float
    dropin_timeout: float
    check_timeout: float
    log_retention: float
    stop_file: Path
    job_name: str
    heartbeat_stale: float
    heartbeat_url: str | None = None
    heartbeat_proxy: str | None = None
    heartbeat_every: float = 300.0
    heartbeat_suffixes: bool = True
    mail_user: str | None = None
    metrics_dir: Path | None = None
    handover_lead: float = 3600.0
    handover_warn: float = 900.0


@dataclass(frozen=True)
class CronPeriods:
    """[cron]: the periods of cron.d/cron.{hourly,daily,weekly}/, in seconds."""

    hourly: float
    daily: float
    weekly: float


@dataclass(frozen=True)
class AlertSettings:
    """[alerts]: the default route, reminders and when a channel counts as down."""

    notify: Mapping[str, tuple[str, ...]] | None
    repeat_every: float
    after: int
    channel_down_after: float
    templates: Path | None
    cluster: str | None


@dataclass(frozen=True)
class CheckConfig:
    """One [[check]]: the keys every check has, and its type's own (`options`)."""

    name: str
    type: str
    every: float
    timeout: float | None = None
    notify: Mapping[str, tuple[str, ...]] | None = None
    runbook: str | None = None
    after: int | None = None
    repeat_every: float | None = None
    enabled: bool = True
    tags: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=lambda: frozen_map({}))
    """The check type's own keys, parsed to their types."""


@dataclass(frozen=True)
class NotifyConfig:
    """One [[notify]] channel: name, type, and its type's own keys (`options`)."""

    name: str
    type: str
    enabled: bool = True
    options: Mapping[str, Any] = field(default_factory=lambda: frozen_map({}))


@dataclass(frozen=True)
class Config:
    """The whole watchdogs.toml, validated."""

    path: Path
    scheduler: SchedulerSettings
    cron: CronPeriods
    alerts: AlertSettings
    checks: tuple[CheckConfig, ...] = ()
    notifiers: tuple[NotifyConfig, ...] = ()

    def check(self, name: str) -> CheckConfig | None:
        return next((c for c in self.checks if c.name == name), None)

    def notifier(self, name: str) -> NotifyConfig | None:
        return next((n for n in self.notifiers if n.name == name), None)
