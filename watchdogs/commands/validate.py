"""`watchdogs validate`: every problem in the config at once, or a one-line summary."""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence

from watchdogs import units
from watchdogs.commands.base import CommandResult, config_from_args
from watchdogs.config.model import Config
from watchdogs.errors import ConfigError, ConfigProblem


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("validate", help="check the config file and report every problem")
    parser.set_defaults(handler=validate)


def validate(args: argparse.Namespace) -> CommandResult:
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        problems = [str(p) for p in exc.problems]
        return CommandResult(str(exc), {"valid": False, "problems": problems}, exit_code=2)
    unknown = _unknown_users(config)
    if unknown:
        error = ConfigError(unknown)
        return CommandResult(str(error), {"valid": False, "problems": [str(p) for p in unknown]},
                             exit_code=2)
    types = Counter(c.type for c in config.checks)
    kinds = ", ".join(f"{n} {t}" for t, n in sorted(types.items())) or "none"
    channels = ", ".join(n.name for n in config.notifiers) or "none"
    text = (f"{config.path}: valid: {units.count(len(config.checks), 'check')} ({kinds}); "
            f"{units.count(len(config.notifiers), 'channel')} ({channels}); "
            f"state in {config.scheduler.state_dir}")
    warnings = nowhere_warnings(config) + shared_folder_warnings(config)
    for warning in warnings:   # stderr: the summary stays one line (Nagios style)
        print(f"watchdogs: warning: {warning}", file=sys.stderr)
    data = {"valid": True, "path": str(config.path), "checks": [c.name for c in config.checks],
            "notifiers": [n.name for n in config.notifiers], "warnings": warnings}
    return CommandResult(text, data)


def nowhere_warnings(config: Config) -> list[str]:
    """Alerts that would go nowhere: no channel at all, or a route that names no channel for
    a severity (they are recorded, and `watchdogs alerts` lists them, but nobody is told)."""
    if not any(n.enabled for n in config.notifiers):
        what = "no enabled [[notify]] channel" if config.notifiers else "no [[notify]] channel"
        return [f"{what}: every alert goes nowhere (only recorded; `watchdogs alerts` lists them). "
                "Add a channel, e.g. type = \"email\"."]
    found = []
    routes = [("[alerts] notify", config.alerts.notify)]
    routes += [(f'check "{c.name}" notify', c.notify) for c in config.checks if c.notify is not None]
    for where, route in routes:
        if route is None:
            continue
        missing = [sev.upper() for sev in ("warning", "critical", "unknown") if not _named(route, sev)]
        if missing:
            found.append(f"{where} names no channel for {', '.join(missing)}: such alerts go nowhere")
    return found


def shared_folder_warnings(config: Config) -> list[str]:
    """Folders outside the state folder that the watchdog writes files into, when others can
    write them too: accepted (a group-shared textfile folder can be a deliberate setup), but
    said, as whoever can write the folder can replace or remove what the watchdog puts there
    (the watchdog itself never writes through a link planted there: docs/trust.md)."""
    from pathlib import Path

    from watchdogs.trust import others_can_write

    folders: list[tuple[str, Path]] = []
    if config.scheduler.metrics_dir is not None:
        folders.append(("[scheduler] metrics_dir", Path(config.scheduler.metrics_dir)))
    for channel in config.notifiers:
        path = channel.options.get("path")
        if channel.type == "logfile" and isinstance(path, Path):
            folders.append((f'channel "{channel.name}" path', path.parent))
    found = []
    for where, folder in folders:
        who = others_can_write(folder)
        if who:
            found.append(f"{where}: {folder} is {who}: others can replace or remove the files the "
                         f"watchdog writes there (fix, unless shared on purpose: chmod go-w {folder})")
    return found


def _named(route: Mapping[str, Sequence[str]], severity: str) -> Sequence[str]:
    # watchdogs.alerts.routing's rule (UNKNOWN goes where WARNING goes, else CRITICAL),
    # repeated here: `validate` stays clear of the alert machinery's imports.
    for key in (severity, *(("warning", "critical") if severity == "unknown" else ())):
        if key in route:
            return route[key]
    return ()


def _unknown_users(config: Config) -> list[ConfigProblem]:
    """Every `users` entry naming a user or group this system does not know. Here and not
    at load: a directory service that is down for a minute must not refuse the whole config
    of a running scheduler (there the one check says UNKNOWN); `validate` is where a person
    finds the typo before squeue's `Invalid user` makes a running job look gone."""
    from watchdogs.slurmctl.users import unknown_names

    problems = []
    for check in config.checks:
        users = check.options.get("users")
        if not users:
            continue
        for problem in unknown_names(users):
            problems.append(ConfigProblem(str(config.path), f'check "{check.name}"', "users",
                                          list(users), f"existing users and @groups ({problem})"))
    return problems
