"""Entry-point registries: `watchdogs.checks` and `watchdogs.notifiers`.

Other packages add check types and channels by declaring entry points in these groups.
A class is imported the first time its name is looked up, so a config that uses two
channel types imports those two modules, not every channel's client library.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar, Protocol

CHECKS_GROUP = "watchdogs.checks"
NOTIFIERS_GROUP = "watchdogs.notifiers"


class PluginClass(Protocol):
    """What the config loader asks of a registered class; watchdogs.configured.Configured,
    the base of every check and channel, has it. (A protocol: this module stays below both.)"""

    options: ClassVar[Mapping[str, Any]]

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]: ...


class LazyClasses(Mapping[str, type[PluginClass]]):
    """name -> class of one entry-point group, each imported on first use. A name whose
    import fails is absent (its error is in `broken`), so one broken plugin hides nothing
    else."""

    def __init__(self, points: Mapping[str, metadata.EntryPoint]) -> None:
        self._points = dict(points)
        self._loaded: dict[str, type[PluginClass]] = {}
        self.broken: dict[str, str] = {}
        self._lock = threading.Lock()  # checks of one tick may look up types from threads

    def _load(self, name: str) -> type[PluginClass] | None:
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            if name in self.broken or name not in self._points:
                return None
            try:
                self._loaded[name] = self._points[name].load()
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the others
                self.broken[name] = f"{type(exc).__name__}: {exc}"
                return None
            return self._loaded[name]

    def __getitem__(self, name: str) -> type[PluginClass]:
        found = self._load(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._load(name) is not None

    def __iter__(self) -> Iterator[str]:
        """Every name that loads (importing them all: for listings and error messages)."""
        return iter([n for n in sorted(self._points) if self._load(n) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class Registry:
    group: str
    classes: Mapping[str, type[PluginClass]]
    broken: Mapping[str, str] = field(default_factory=dict)
    """Entry points that failed to import (so far): name -> error text."""

    def names(self) -> list[str]:
        return sorted(self.classes)


def load_group(group: str) -> Registry:
    """The group's registry; nothing is imported until a name is looked up."""
    points = {ep.name: ep for ep in metadata.entry_points(group=group)}
    classes = LazyClasses(points)
    return Registry(group, classes, classes.broken)
