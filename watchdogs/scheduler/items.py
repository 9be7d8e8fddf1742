"""What the scheduler runs: built-in checks from the config and drop-ins from cron.d,
both seen as items with an id, a schedule and a timeout."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from watchdogs.checks.base import Check
from watchdogs.dropins.discovery import DropIn, discover
from watchdogs.dropins.safety import Refusal
from watchdogs.schedules import Schedule, every

if TYPE_CHECKING:
    from watchdogs.config.model import Config
    from watchdogs.plugins import Registry
    from watchdogs.result import CheckResult
    from watchdogs.sink import ItemOutcome


@dataclass(frozen=True)
class Item:
    """One scheduled item: a built-in check or a drop-in, with its schedule and route."""

    id: str
    kind: str
    """"check", "dropin", "slurm" or "crontab" (as in ItemOutcome.kind)."""
    schedule: Schedule
    timeout: float
    check: Check | None = None
    dropin: DropIn | None = None
    notify: Mapping[str, tuple[str, ...]] | None = None
    runbook: str | None = None
    after: int | None = None
    repeat_every: float | None = None

    @property
    def signature(self) -> tuple[Any, ...]:
        """Changes to these replace the item's schedule; anything else is picked up in place."""
        return (self.kind, self.schedule)

    @property
    def references(self) -> tuple[str, ...]:
        """Names of other checks this check's options point at (run those first in a tick)."""
        if self.check is None:
            return ()
        return tuple(str(self.check.opts.get(key)) for key in self.check.references
                     if self.check.opts.get(key) is not None)

    def outcome(self, result: CheckResult, started: datetime, finished: datetime,
                log: str | None = None) -> ItemOutcome:
        from watchdogs.sink import ItemOutcome  # here: `status` lists items and runs none

        return ItemOutcome(self.id, self.kind, result, started, finished, self.notify, self.runbook,
                           self.after, self.repeat_every, log)


def check_items(config: Config, registry: Registry) -> tuple[list[Item], list[Refusal]]:
    """An item per enabled [[check]], instantiated from the registry's class for its type."""
    items, refused = [], []
    for cfg in config.checks:
        if not cfg.enabled:
            continue
        cls = registry.classes.get(cfg.type)
        if cls is None or not issubclass(cls, Check):
            why = "is not registered" if cls is None else "is not a watchdogs.checks.base.Check"
            refused.append(Refusal(f'check "{cfg.name}"', f"type {cfg.type!r} {why}"))
            continue
        try:
            check = cls(cfg)
        except Exception as exc:  # noqa: BLE001 - one broken check class must not stop the others
            refused.append(Refusal(f'check "{cfg.name}"', f"cannot set up: {type(exc).__name__}: {exc}"))
            continue
        items.append(Item(cfg.name, "check", every(cfg.every),
                          cfg.timeout or config.scheduler.check_timeout, check=check,
                          notify=cfg.notify, runbook=cfg.runbook, after=cfg.after,
                          repeat_every=cfg.repeat_every))
    return items, refused


def dropin_items(config: Config, uid: int | None = None) -> tuple[list[Item], list[Refusal]]:
    found = discover(config.scheduler.cron_dir, config.cron, uid)
    items = [Item(d.id, d.kind, d.schedule, d.timeout or config.scheduler.dropin_timeout, dropin=d)
             for d in found.dropins]
    return items, list(found.refused)


def all_items(config: Config, registry: Registry, uid: int | None = None
              ) -> tuple[dict[str, Item], list[Refusal]]:
    checks, refused_checks = check_items(config, registry)
    dropins, refused_dropins = dropin_items(config, uid)
    return {i.id: i for i in checks + dropins}, refused_checks + refused_dropins
