"""What built-in checks and alert channels share: a validated config table of their own."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from watchdogs.config.model import CheckConfig, NotifyConfig
    from watchdogs.config.options import Option


class Configured:
    """A plugin configured by one [[check]] or [[notify]] table.

    `options` declares the type's own keys (the loader validates them and reports every
    problem at once); `validate_options` adds cross-key rules, as (key, value, expected),
    and runs only when every key parsed."""

    options: ClassVar[Mapping[str, Option]] = {}
    common_defaults: ClassVar[Mapping[str, Any]] = {}
    """This type's own defaults for keys every table has (e.g. a check type's `every`)."""
    config: CheckConfig | NotifyConfig

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def opts(self) -> Mapping[str, Any]:
        return self.config.options

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        return []
