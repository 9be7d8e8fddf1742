"""Entry-point registries: `watchdogs.checks` and `watchdogs.notifiers`.

Other packages add check types and channels by declaring entry points in these groups.
A class is imported the first time its name is looked up, so a config that uses two
channel types imports those two modules, not every channel's client library.

The built-in types are also listed in BUILTIN (the same targets as pyproject.toml's entry
points; a test keeps the two equal): looking one up imports its module directly. Scanning
the installed distributions' entry points costs tens of milliseconds, so it happens only
for a name not in that table, or for a listing of every name. A built-in name wins over
a plugin's entry point of the same name.
"""
from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

CHECKS_GROUP = "watchdogs.checks"
NOTIFIERS_GROUP = "watchdogs.notifiers"

BUILTIN: Mapping[str, Mapping[str, str]] = {
    CHECKS_GROUP: {
        "job": "watchdogs.checks.job:JobCheck",
        "log_stale": "watchdogs.checks.log_stale:LogStaleCheck",
        "disk": "watchdogs.checks.disk:DiskCheck",
        "nodes": "watchdogs.checks.nodes:NodesCheck",
        "training": "watchdogs.checks.training:TrainingCheck",
    },
    NOTIFIERS_GROUP: {
        "console": "notifiers.console:ConsoleNotifier",
        "logfile": "notifiers.logfile:LogfileNotifier",
        "email": "notifiers.email:EmailNotifier",
        "slack": "notifiers.slack:SlackNotifier",
        "sms": "notifiers.sms:SmsNotifier",
        "webhook": "notifiers.webhook:WebhookNotifier",
        "apprise": "notifiers.apprise:AppriseNotifier",
    },
}



class PluginClass(Protocol):
    """What the config loader asks of a registered class; watchdogs.configured.Configured,
    the base of every check and channel, has it. (A protocol: this module stays below both.)"""

    options: ClassVar[Mapping[str, Any]]

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]: ...


Loader = Callable[[], "type[PluginClass]"]


def _import_target(target: str) -> Loader:
    """"module:attr" (an entry point's value) -> a function that imports it."""
    module, _, attr = target.partition(":")

    def load() -> type[PluginClass]:
        found: type[PluginClass] = getattr(importlib.import_module(module), attr)
        return found
    return load


def _entry_points(group: str) -> dict[str, Loader]:
    from importlib import metadata  # slow to import and to scan: only when asked

    return {ep.name: ep.load for ep in metadata.entry_points(group=group)}


class LazyClasses(Mapping[str, type[PluginClass]]):
    """name -> class of one entry-point group, each imported on first use. A name whose
    import fails is absent (its error is in `broken`), so one broken plugin hides nothing
    else."""

    def __init__(self, builtin: Mapping[str, str], scan: Callable[[], Mapping[str, Loader]]) -> None:
        self._builtin = {name: _import_target(target) for name, target in builtin.items()}
        self._scan = scan
        self._scanned: dict[str, Loader] | None = None
        self._loaded: dict[str, type[PluginClass]] = {}
        self.broken: dict[str, str] = {}
        self._lock = threading.Lock()  # checks of one tick may look up types from threads

    def _points(self) -> dict[str, Loader]:
        """Built-ins plus the installed entry points (scanned once, on first need)."""
        if self._scanned is None:
            self._scanned = {**self._scan(), **self._builtin}
        return self._scanned

    def _loader(self, name: str) -> Loader | None:
        return self._builtin.get(name) or self._points().get(name)

    def _load(self, name: str) -> type[PluginClass] | None:
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            if name in self.broken:
                return None
            loader = self._loader(name)
            if loader is None:
                return None
            try:
                self._loaded[name] = loader()
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
        with self._lock:
            names = sorted(self._points())
        return iter([n for n in names if self._load(n) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class Registry:
    """The classes of one entry-point group, by type name."""

    group: str
    classes: Mapping[str, type[PluginClass]]
    broken: Mapping[str, str] = field(default_factory=dict)
    """Entry points that failed to import (so far): name -> error text."""

    def names(self) -> list[str]:
        return sorted(self.classes)


def load_group(group: str) -> Registry:
    """The group's registry; nothing is imported or scanned until a name is looked up."""
    classes = LazyClasses(BUILTIN.get(group, {}), lambda: _entry_points(group))
    return Registry(group, classes, classes.broken)
