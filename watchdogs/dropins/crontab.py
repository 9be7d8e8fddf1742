"""`cron.d/crontab`: one scheduled command per line, never run through a shell.

    # schedule     [options]        command                            arguments
    */15 * * * *   timeout=2m       /usr/lib/nagios/plugins/check_disk -w 10% -c 5% -p /scratch
    @hourly        name=gpu-health  scripts/check_gpu.sh
    @every 30m                      jobs/cleanup.slurm

The schedule is 5 cron fields, an @shorthand (@hourly, @daily, @weekly, @monthly, @yearly,
@reboot = once each time a scheduler instance starts) or "@every <duration>". Options
before the command: `timeout=<duration>` and `name=<id>` (the item is "crontab/<id>";
default: the command's file name). The rest of the line is split like a shell would
(`shlex.split`: quotes work, `#` starts a comment) but no shell runs it: no variables,
pipes or globs. A relative command is taken from the cron.d folder; PATH is not searched.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from watchdogs import units
from watchdogs.dropins.safety import Refusal
from watchdogs.schedules import Schedule, parse_spec

_OPTION = re.compile(r"(timeout|name)=(.*)")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class CrontabEntry:
    """One line of cron.d/crontab: its schedule, name and command."""

    line_no: int
    name: str
    schedule: Schedule
    argv: tuple[str, ...]
    """argv[0] is the command, resolved to an absolute path."""
    timeout: float | None


def parse_crontab(text: str, base: Path, label: str = "crontab") -> tuple[list[CrontabEntry], list[Refusal]]:
    """Every entry, and every bad line as a Refusal naming the line and what was expected."""
    entries: list[CrontabEntry] = []
    problems: list[Refusal] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            entries.append(parse_line(line, line_no, base))
        except ValueError as exc:
            problems.append(Refusal(f"{label}:{line_no}", f"{line.strip()!r}: expected {exc}"))
    return _unique_names(entries), problems


def parse_line(line: str, line_no: int, base: Path) -> CrontabEntry:
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as exc:
        raise ValueError(f"balanced quotes ({exc})") from None
    width = 2 if tokens[0] == "@every" else 1 if tokens[0].startswith("@") else 5
    if len(tokens) <= width:
        raise ValueError(f"a schedule ({width} field{'s' if width > 1 else ''}) then a command")
    schedule = parse_spec(" ".join(tokens[:width]))
    rest = tokens[width:]
    options: dict[str, str] = {}
    while rest and (option := _OPTION.fullmatch(rest[0])):
        key, value = option.groups()
        options[key] = value
        rest.pop(0)
    if not rest:
        raise ValueError("a command after the schedule and options")
    timeout = _timeout(options.get("timeout"))
    name = options.get("name") or Path(rest[0]).name
    if not _NAME.fullmatch(name) or name.startswith("."):
        # The name becomes a folder of run logs and a lock file: ".." would escape them.
        raise ValueError(f"name={name!r} made of letters, digits, '_', '.' and '-', "
                         "not starting with '.'")
    command = Path(rest[0]).expanduser()
    command = command if command.is_absolute() else base / command
    return CrontabEntry(line_no, name, schedule, (str(command), *rest[1:]), timeout)


def _timeout(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return units.parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"timeout={text!r}: {exc}") from None


def _unique_names(entries: list[CrontabEntry]) -> list[CrontabEntry]:
    """Two lines naming the same command become name, name-2, ... (give `name=` to keep an
    item's history when lines move)."""
    seen: dict[str, int] = {}
    unique = []
    for entry in entries:
        seen[entry.name] = seen.get(entry.name, 0) + 1
        if seen[entry.name] > 1:
            entry = CrontabEntry(entry.line_no, f"{entry.name}-{seen[entry.name]}", entry.schedule,
                                 entry.argv, entry.timeout)
        unique.append(entry)
    return unique
