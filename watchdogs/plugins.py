"""Entry-point registries: `watchdogs.checks` and `watchdogs.notifiers`.

Other packages add check types and channels by declaring entry points in these groups.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata

CHECKS_GROUP = "watchdogs.checks"
NOTIFIERS_GROUP = "watchdogs.notifiers"


@dataclass(frozen=True)
class Registry:
    group: str
    classes: Mapping[str, type]
    broken: Mapping[str, str]
    """Entry points that failed to import: name -> error text."""

    def names(self) -> list[str]:
        return sorted(self.classes)


def load_group(group: str) -> Registry:
    classes: dict[str, type] = {}
    broken: dict[str, str] = {}
    for ep in metadata.entry_points(group=group):
        try:
            classes[ep.name] = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the others
            broken[ep.name] = f"{type(exc).__name__}: {exc}"
    return Registry(group, classes, broken)
