"""What every channel is: a small class with `notify(message)` that raises
TransportError(message, permanent=...) when it cannot deliver."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from watchdogs.config.model import NotifyConfig
from watchdogs.config.options import Option


class TransportError(Exception):
    """Delivery failed. `permanent` means retrying the same message cannot help
    (bad address, auth refused); otherwise it is retried with backoff."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class Message:
    """One rendered notification for one channel."""

    subject: str
    text: str
    html: str | None = None
    severity: str = "critical"
    key: str = ""
    """Idempotency key: the same key is never delivered twice."""


class Notifier(ABC):
    type_name: ClassVar[str]
    options: ClassVar[Mapping[str, Option]] = {}

    def __init__(self, config: NotifyConfig) -> None:
        self.config = config

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def opts(self) -> Mapping[str, Any]:
        return self.config.options

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        return []

    @abstractmethod
    def notify(self, message: Message) -> None:
        """Deliver or raise TransportError."""
