"""What a command returns: data that renders as text or as --json."""
from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from watchdogs.config import Config, find_config_path, load_config


@dataclass(frozen=True)
class CommandResult:
    """What a command answers: text for people, data for --json, the exit code."""

    text: str
    data: Mapping[str, Any] = field(default_factory=dict)
    exit_code: int = 0

    def render(self, as_json: bool) -> str:
        if as_json:
            import json  # here: the text answer, what most runs print, needs none of it

            return json.dumps(self.data, indent=2, sort_keys=True, default=str)
        return self.text


Handler = Callable[[argparse.Namespace], CommandResult]


def config_from_args(args: argparse.Namespace) -> Config:
    return load_config(find_config_path(getattr(args, "config", None)))
