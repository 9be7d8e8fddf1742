"""What every built-in check is: a class with typed options and `run(ctx) -> CheckResult`."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from watchdogs.configured import Configured
from watchdogs.errors import WatchdogsError
from watchdogs.result import CheckResult, Status

if TYPE_CHECKING:
    # Annotations only: `status` and `validate` build checks for their option tables and
    # never run one, so they need neither the tick (nor Slurm's modules behind it).
    from watchdogs.checks.context import TickContext
    from watchdogs.config.model import CheckConfig


class Check(Configured, ABC):
    """Subclass, set `type_name` and `options`, implement `run`, and register the class in the
    `watchdogs.checks` entry-point group."""

    type_name: ClassVar[str]
    references: ClassVar[Mapping[str, str]] = {}
    """Option keys whose value names another [[check]], mapped to the type it must have."""

    def __init__(self, config: CheckConfig) -> None:
        self.config: CheckConfig = config

    @abstractmethod
    def run(self, ctx: TickContext) -> CheckResult:
        """Look once and report. Must not block past its timeout on a dead mount or
        controller: bound every outside call."""


def run_check(check: Check, ctx: TickContext) -> CheckResult:
    """Run one check; any exception becomes UNKNOWN with the error, never a crash."""
    try:
        result = check.run(ctx)
    except WatchdogsError as exc:
        result = CheckResult(Status.UNKNOWN, f"{check.name}: {exc}")
    except Exception as exc:  # noqa: BLE001 - one broken check must not stop the others
        result = CheckResult(Status.UNKNOWN, f"{check.name}: internal error: {type(exc).__name__}: {exc}")
    ctx.results[check.name] = result
    return result
