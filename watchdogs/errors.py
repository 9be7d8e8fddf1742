"""The project's own error types; the CLI turns them into a message and an exit code."""
from __future__ import annotations

from dataclasses import dataclass

from watchdogs.redact import redact, scrub_text


class WatchdogsError(Exception):
    """An error the user can act on. `exit_code` is what the CLI exits with."""

    exit_code: int = 2


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a config file, with everything needed to find and fix it.

    The one place config errors are built, so the one place secrets are masked: a secret
    written into the config (refused) is never echoed by `validate`, `--json` or the log."""

    file: str
    table: str
    key: str
    value: object
    expected: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", redact(self.key, self.value))
        object.__setattr__(self, "expected", scrub_text(self.expected))

    def __str__(self) -> str:
        where = f"{self.file}: {self.table}" if self.table else self.file
        if self.key:
            return f"{where}: key {self.key!r} = {self.value!r}: expected {self.expected}"
        return f"{where}: {self.expected}"


class ConfigError(WatchdogsError):
    """All problems found in one config file, reported together."""

    exit_code = 2

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in config"
        super().__init__(head + ":\n" + "\n".join(f"  {p}" for p in self.problems))


class SlurmError(WatchdogsError):
    """Slurm could not be asked (controller down, command missing, timeout, error reply)."""

    exit_code = 3


class SecretError(WatchdogsError):
    """A secret could not be read safely. The message never contains the secret."""

    exit_code = 2
