"""Validate watchdogs.toml (read by watchdogs.config.source), reporting every problem at once."""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from watchdogs.config import sections
from watchdogs.config.model import (
    AlertSettings,
    CheckConfig,
    Config,
    CronPeriods,
    NotifyConfig,
    SchedulerSettings,
    frozen_map,
)
from watchdogs.config.options import Option
from watchdogs.config.paths import NOT_ANSWERING, path_problem
from watchdogs.config.source import parse_toml, read_toml
from watchdogs.config.tables import validate_table
from watchdogs.errors import ConfigError, ConfigProblem
from watchdogs.plugins import CHECKS_GROUP, NOTIFIERS_GROUP, Registry, load_group
from watchdogs.textsafe import control_characters

Answers = Callable[[Sequence[Path]], frozenset[Path]]
"""Of these paths, the ones whose filesystem did not answer in time (a hung mount): a probe
with a deadline, in a child process (watchdogs.fsprobe.answers), passed in by the caller."""


class _Problems:
    """Every problem of one file, in the order found. (A plain class: a dataclass costs
    about a millisecond to define, on the path of every command that reads the config.)"""

    def __init__(self, file: str, answers: Answers | None = None) -> None:
        self.file = file
        self.items: list[ConfigProblem] = []
        self.answers = answers
        """The load's probe of its paths' filesystems (see load_config), or None."""

    def add(self, table: str, key: str, value: Any, expected: str) -> None:
        self.items.append(ConfigProblem(self.file, table, key, value, expected))

    def extend(self, table: str, found: list[tuple[str, Any, str]]) -> None:
        for key, value, expected in found:
            self.add(table, key, value, expected)


def load_config(path: str | os.PathLike[str], checks: Registry | None = None,
                notifiers: Registry | None = None, *, source: bytes | None = None,
                broken_channels: dict[str, list[ConfigProblem]] | None = None,
                answers: Answers | None = None) -> Config:
    """`source`: parse these bytes (e.g. the last good copy) as if they were the file at
    `path`. `broken_channels`: when given, a [[notify]] table with problems does not fail
    the load; it is left out of the config and its problems are put there by channel
    name (the scheduler disables that channel alone and says so on the others).
    `answers`: asked first about the folders the config must check, so that a folder on a
    hung mount is a problem in words (NOT_ANSWERING) instead of a load that never returns."""
    path = Path(path).expanduser().absolute()
    problems = _Problems(str(path), answers)
    raw = read_toml(path) if source is None else parse_toml(source, path)
    base = path.parent
    if source is None:
        _trust_problem(path, problems)
    for key in raw:
        if key not in sections.TOP_LEVEL:
            problems.add("top level", key, raw[key],
                         "a known table: " + ", ".join(f"[{t}]" for t in sections.TOP_LEVEL))
    scheduler = _section(raw, "scheduler", sections.SCHEDULER, problems, base)
    cron = _section(raw, "cron", sections.CRON, problems, base)
    alerts = _section(raw, "alerts", sections.ALERTS, problems, base)
    checks_reg = checks or load_group(CHECKS_GROUP)
    notifiers_reg = notifiers or load_group(NOTIFIERS_GROUP)
    notify_cfgs = _plugin_tables(raw, "notify", sections.NOTIFY_COMMON, notifiers_reg, problems, base)
    check_cfgs = _plugin_tables(raw, "check", sections.CHECK_COMMON, checks_reg, problems, base)
    if broken_channels is not None:
        _set_aside_channels(problems, notify_cfgs, broken_channels)
    # A channel defined but invalid has its own problem lines: a reference to it is no second problem.
    _check_references(check_cfgs, notify_cfgs, alerts, checks_reg, problems,
                      set(broken_channels or ()) | _defined_names(raw, "notify"))
    if problems.items:
        raise ConfigError(problems.items)
    return Config(
        path=path,
        scheduler=_scheduler_settings(scheduler, base),
        cron=CronPeriods(**cron),
        alerts=AlertSettings(**alerts),
        checks=tuple(CheckConfig(**c) for c in check_cfgs),
        notifiers=tuple(NotifyConfig(**n) for n in notify_cfgs),
    )


def _defined_names(raw: dict[str, Any], kind: str) -> set[str]:
    """The names of every [[kind]] table written, valid or not."""
    tables = raw.get(kind, [])
    return {t["name"] for t in tables if isinstance(t, dict) and isinstance(t.get("name"), str)} \
        if isinstance(tables, list) else set()


def _trust_problem(path: Path, problems: _Problems) -> None:
    """The config decides what runs, what is submitted and where secrets are sent: it must
    be a file only you (or root) can change, like everything it names (watchdogs.trust)."""
    from watchdogs.trust import distrust

    found = distrust(path)
    if found is not None:
        problems.add("file", "owner and mode", f"{found.path}: {found.why}",
                     f"a config only you (or root) can change; {found.fix}")


def _set_aside_channels(problems: _Problems, parsed: list[dict[str, Any]],
                        broken: dict[str, list[ConfigProblem]]) -> None:
    """Move the problems of named [[notify]] tables that failed to parse into `broken`."""
    good = {n["name"] for n in parsed}
    kept = []
    for problem in problems.items:
        name = problem.table.removeprefix('notify "').removesuffix('"')
        if problem.table.startswith('notify "') and name not in good and problem.key != "name":
            broken.setdefault(name, []).append(problem)
        else:
            kept.append(problem)
    problems.items[:] = kept


def _resolve(value: Any, base: Path) -> Any:
    if isinstance(value, Path) and not value.is_absolute():
        return base / value
    return value


def _section(raw: dict[str, Any], name: str, options: Mapping[str, Any], problems: _Problems,
             base: Path) -> dict[str, Any]:
    table = raw.get(name, {})
    if not isinstance(table, dict):
        problems.add(f"[{name}]", name, table, "a table")
        table = {}
    values, found = validate_table(table, options)
    problems.extend(f"[{name}]", found)
    for key, option in options.items():
        if key in values and values[key] is None and option.default is not None:
            values[key] = option.default
    for key, value in values.items():
        if key in ("state_dir", "cron_dir", "stop_file", "templates", "metrics_dir") \
                and isinstance(value, str):
            values[key] = Path(value).expanduser()
    values = {k: _resolve(v, base) for k, v in values.items()}
    problems.extend(f"[{name}]", _path_problems(table, values, options, base, problems.answers))
    return values


def _climbs_past_root(given: str, base: Path) -> bool:
    """True for a path whose '..'s lead above / (from the config's folder when relative):
    the kernel quietly stops at /, so "../../../x" would mean /x."""
    path = Path(given).expanduser()
    depth = 0 if path.is_absolute() else len(base.parts) - 1
    for part in path.parts[1:] if path.is_absolute() else path.parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return True
    return False


def _path_problems(raw: Mapping[str, Any], values: Mapping[str, Any], options: Mapping[str, Option],
                   base: Path, answers: Answers | None = None) -> list[tuple[str, Any, str]]:
    """Folders that must exist (or be creatable), checked once relative paths are resolved."""
    found = []
    checked = [v for k, o in options.items() if o.exists and isinstance(v := values.get(k), Path)]
    hung = answers(checked) if answers is not None and checked else frozenset()
    for key, option in options.items():
        value = values.get(key)
        given = raw.get(key)
        if isinstance(given, str) and isinstance(value, Path) and _climbs_past_root(given, base):
            found.append((key, given, "a path that does not climb above / (more '..' than the "
                                      "config's folder has levels)"))
            continue
        if option.exists and isinstance(value, Path):
            reason = NOT_ANSWERING if value in hung else path_problem(value, option.exists)
            if reason:
                found.append((key, raw.get(key, str(value)), reason))
    return found


def _scheduler_settings(values: dict[str, Any], base: Path) -> SchedulerSettings:
    values = dict(values)
    values["cron_dir"] = values["cron_dir"] or base / "cron.d"
    values["stop_file"] = values["stop_file"] or values["state_dir"] / "STOP"
    return SchedulerSettings(**values)


def _table_label(kind: str, table: Any, index: int) -> str:
    name = table.get("name") if isinstance(table, dict) else None
    return f'{kind} "{name}"' if isinstance(name, str) else f"{kind} #{index + 1}"


def _plugin_tables(raw: dict[str, Any], kind: str, common: Mapping[str, Any], registry: Registry,
                   problems: _Problems, base: Path) -> list[dict[str, Any]]:
    tables = raw.get(kind, [])
    if not isinstance(tables, list):
        problems.add("top level", kind, "(a table)", f"an array of tables: write [[{kind}]]")
        return []
    parsed, seen = [], set()
    for index, table in enumerate(tables):
        label = _table_label(kind, table, index)
        name = table.get("name") if isinstance(table, dict) else None
        if isinstance(name, str) and name in seen:
            problems.add(label, "name", name, f"a name no other [[{kind}]] uses")
        seen.add(name)
        entry = _plugin_table(table, label, kind, common, registry, problems, base)
        if entry is not None:
            parsed.append(entry)
    return parsed


def _plugin_table(table: Any, label: str, kind: str, common: Mapping[str, Any],
                  registry: Registry, problems: _Problems, base: Path) -> dict[str, Any] | None:
    if not isinstance(table, dict):
        problems.add(label, "", table, f"a table ([[{kind}]])")
        return None
    common_raw = {k: v for k, v in table.items() if k in common}
    values, found = validate_table(common_raw, common)
    problems.extend(label, found)
    type_name = values.get("type")
    cls: Any = registry.classes.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        if isinstance(type_name, str):
            _unknown_type(label, type_name, registry, problems)
        return None
    for key, default in getattr(cls, "common_defaults", {}).items():
        if key not in table:
            values[key] = default
    own, found = validate_table(table, cls.options, skip=tuple(common))
    # Resolve relative paths first, so cross-key rules (e.g. secret-file permissions) see the real file.
    own = {k: _resolve(v, base) for k, v in own.items()}
    found += _path_problems(table, own, cls.options, base, problems.answers)
    if kind == "notify":
        found += _control_problems(own)
    if not found:
        found = list(cls.validate_options(own))
    problems.extend(label, found)
    if found or "name" not in values:
        return None
    values["options"] = frozen_map(own)
    return values


def _control_problems(values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """A channel's text values end up in mail headers, HTTP headers and SMTP commands, where
    a CR or LF starts a header or command of the sender's choosing (`to = ["a@x.org\\r\\n
    Bcc: b@y.org"]`): no control character is accepted in any of them."""
    found = []
    for key, value in values.items():
        texts = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) \
            else [*value.keys(), *value.values()] if isinstance(value, Mapping) else []
        for text in texts:
            held = control_characters(text) if isinstance(text, str) else ""
            if held:
                found.append((key, text, f"text without control characters (it holds {held}): a "
                                         "channel's values reach mail and HTTP headers"))
                break
    return found


def _unknown_type(label: str, type_name: str, registry: Registry, problems: _Problems) -> None:
    if type_name in registry.broken:
        problems.add(label, "type", type_name, f"a loadable plugin ({registry.broken[type_name]})")
        return
    problems.add(label, "type", type_name,
                 f"one of the types registered in {registry.group}: " + ", ".join(registry.names()))


def _check_references(checks: list[dict[str, Any]], notifiers: list[dict[str, Any]],
                      alerts: dict[str, Any], registry: Registry, problems: _Problems,
                      set_aside: set[str] | None = None) -> None:
    channels = {n["name"] for n in notifiers} | (set_aside or set())
    by_name = {c["name"]: c["type"] for c in checks}
    routes = [(f'check "{c["name"]}"', c.get("notify")) for c in checks]
    routes.append(("[alerts]", alerts.get("notify")))
    for label, route in routes:
        for names in (route or {}).values():
            for name in names:
                if name not in channels:
                    known = ", ".join(sorted(channels)) or "none defined"
                    problems.add(label, "notify", name, f"the name of a [[notify]] channel ({known})")
    for check in checks:
        refs = getattr(registry.classes.get(check["type"]), "references", {})
        for key, wanted_type in refs.items():
            target = check["options"].get(key)
            if target is not None and by_name.get(target) != wanted_type:
                problems.add(f'check "{check["name"]}"', key, target,
                             f'the name of a [[check]] of type "{wanted_type}"')
