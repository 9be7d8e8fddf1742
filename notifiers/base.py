"""What every channel is: a small class with `notify(message)` that raises
TransportError(message, permanent=...) when it cannot deliver.

A channel also knows how to turn a batch of alert events into its Message (`render`, by
default the channel type's templates), how to describe where it delivers without naming
a secret (`describe`), and how to scrub its secrets out of any text (`scrub`).
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from notifiers.secrets import Secret, fragments, load_secret, scrub
from watchdogs.config.model import NotifyConfig
from watchdogs.configured import Configured
from watchdogs.textsafe import from_os, visible

if TYPE_CHECKING:
    from notifiers.render import Templates
    from watchdogs.alerts.events import Batch


class TransportError(Exception):
    """Delivery failed. `permanent` means retrying the same message cannot help
    (bad address, auth refused); otherwise it is retried with backoff. `retry_after` is the
    server's own wish (HTTP 429 Retry-After); `done` names the recipients that did get it,
    so a retry skips them."""

    def __init__(self, message: str, permanent: bool = False, retry_after: float | None = None,
                 done: tuple[str, ...] = (), local: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.retry_after = retry_after
        self.done = done
        self.local = local
        """The failure is this machine's own disk (full, over quota, read-only, a folder
        not there yet): it says nothing about the message, and it passes when space does. A
        sender keeps such a message for as long as it can rather than count it as a try."""


@dataclass(frozen=True)
class Message:
    """One rendered notification for one channel."""

    subject: str
    text: str
    html: str | None = None
    severity: str = "critical"
    key: str = ""
    """Idempotency key: the same key is never delivered twice."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Channel-specific structured content (Slack blocks, webhook alert list); JSON-able."""
    done: tuple[str, ...] = ()
    """Recipients already served by an earlier, partly failed attempt."""

    def __post_init__(self) -> None:
        # The last line of defence behind AlertEvent's cleaning: a user's template may print
        # anything. The subject is one line (a mail header, an SMS, a console line); the text
        # keeps its line breaks; neither holds a control character or a lone surrogate, which
        # the logfile's encode, a terminal, SMTP and JSON would fail on or obey.
        for name, text in (("subject", visible(self.subject, newlines=False)), ("text", visible(self.text)),
                           ("html", None if self.html is None else from_os(self.html))):
            if text is not getattr(self, name):
                object.__setattr__(self, name, text)


class Notifier(Configured, ABC):
    type_name: ClassVar[str]
    secret_keys: ClassVar[tuple[tuple[str, str], ...]] = ()
    """(env key, file key) pairs of options naming a secret, checked by `check_secrets`."""

    def __init__(self, config: NotifyConfig, env: Mapping[str, str] | None = None) -> None:
        self.config: NotifyConfig = config
        self.env: Mapping[str, str] = os.environ if env is None else env
        self._secrets: list[Secret] = []

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"

    @abstractmethod
    def notify(self, message: Message) -> None:
        """Deliver or raise TransportError."""

    def render(self, batch: Batch, templates: Templates) -> Message:
        """The channel's Message for a batch of events: its type's templates by default."""
        return templates.message(batch, self.type_name)

    def describe(self) -> str:
        """Where this channel delivers, for humans; never a secret."""
        return self.type_name

    def endpoints(self) -> tuple[str, ...]:
        """The URLs this channel connects to (`watchdogs doctor` checks they can be reached,
        through `proxy` when the channel has one); () for a channel that stays on the host.
        May read a secret (a URL with a token): SecretError."""
        return ()

    def local_problem(self) -> str | None:
        """What stops a channel that stays on the host from delivering here (a missing
        folder), with the fix; None when nothing does (`watchdogs doctor` shows it)."""
        return None

    @property
    def proxy(self) -> str | None:
        """The channel's own `proxy` key (None: the environment decides, per URL)."""
        value = self.opts.get("proxy")
        return str(value) if value else None

    def send_budget(self) -> float:
        """Worst-case seconds one `notify` may take; the outbox leases an item this long."""
        timeout = self.opts.get("timeout")
        return 2 * float(timeout) + 5 if timeout else 60.0

    def secret(self, env_key: str, file_key: str, what: str) -> Secret | None:
        """Read a secret now (so rotations are picked up); remember it for `scrub`."""
        value = load_secret(self.opts.get(env_key), self.opts.get(file_key), self.env,
                            f'channel "{self.name}": {what}')
        if value is not None and value not in self._secrets:
            self._secrets.append(value)
        return value

    def check_secrets(self) -> None:
        """Raise SecretError now if a configured secret is missing or unsafe."""
        for env_key, file_key in self.secret_keys:
            if self.opts.get(env_key) or self.opts.get(file_key):
                self.secret(env_key, file_key, env_key.rsplit("_", 1)[0])

    def scrub(self, text: str) -> str:
        """`text` without any secret this channel has read (and no token-shaped strings)."""
        return scrub(text, self._secrets)

    def secrets(self) -> tuple[Secret, ...]:
        """The secrets this channel has read so far (for scrubbing text others show)."""
        return tuple(self._secrets)


def known_values(channels: Iterable[Notifier]) -> tuple[str, ...]:
    """Every secret value (and the parts of it a text may hold alone) the channels have
    read: what a drop-in that prints the SMTP password must not get past `status`."""
    return tuple({f for channel in channels for s in channel.secrets() for f in fragments(s.reveal())})


def scrub_message(message: Message, secrets: Iterable[Secret]) -> Message:
    """`message` with every known secret, from any channel, masked in every part: a
    drop-in that prints the SMTP password must not send it to Slack."""
    known = tuple(secrets)

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return scrub(value, known)
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    return replace(message, subject=clean(message.subject), text=clean(message.text),
                   html=clean(message.html), extra=clean(message.extra))
