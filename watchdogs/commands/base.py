"""What a command returns: data that renders as text or as --json."""
from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from watchdogs.config import Config, find_config_path, load_config
from watchdogs.fsprobe.answers import unanswered


@dataclass(frozen=True)
class CommandResult:
    """What a command answers: text for people, data for --json, the exit code."""

    text: str
    data: Mapping[str, Any] = field(default_factory=dict)
    exit_code: int = 0
    hidden: tuple[str, ...] = ()
    """Secret values known to the command (a channel's password) that outside text it shows
    (a drop-in's output) may hold: masked when rendered."""

    def render(self, as_json: bool) -> str:
        """Text or JSON, with secrets masked and control characters shown as escapes (text
        from drop-ins and Slurm reaches a terminal here)."""
        from watchdogs.textsafe import safe_output

        if as_json:
            import json  # here: the text answer, what most runs print, needs none of it

            return safe_output(json.dumps(self.data, indent=2, sort_keys=True, default=str), self.hidden)
        return safe_output(self.text, self.hidden)


Handler = Callable[[argparse.Namespace], CommandResult]


def config_from_args(args: argparse.Namespace) -> Config:
    return load_config(find_config_path(getattr(args, "config", None)), answers=unanswered)


def channel_secrets(config: Config) -> tuple[str, ...]:
    """The secrets the configured channels can read now (their parts too): text from
    outside that a command shows (a drop-in's output) is masked with them. Quietly: a
    channel whose secret cannot be read is `status`'s and `validate`'s to report."""
    import logging

    from notifiers.base import known_values
    from watchdogs.alerts.channels import build_working_channels

    quiet = logging.getLogger("watchdogs.alerts")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        return known_values(build_working_channels(config)[0].values())
    except Exception:  # noqa: BLE001 - a broken channel plugin must not stop a read-only command
        return ()
    finally:
        quiet.setLevel(level)
