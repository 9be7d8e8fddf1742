"""Secrets (SMTP password, Slack webhook URL or token, Twilio token, webhook token).

They come from an environment variable or a file, never from the config itself. A secret
file that group or others may read or write is refused. The value lives in a `Secret`
whose repr/str never show it, and `scrub` removes it (and anything token-shaped) from text
that may echo it: exception messages of smtplib/requests/slack_sdk, third-party log lines.
"""
from __future__ import annotations

import logging
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from watchdogs.errors import SecretError
from watchdogs.redact import MASK, scrub_text

_MIN_FRAGMENT = 8
"""URL path segments at least this long are scrubbed on their own (requests echoes paths)."""



class Secret:
    """A secret value. Only `reveal()` gives it; repr and str name where it came from."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str) -> None:
        self._value = value
        self.source = source

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"<secret from {self.source}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def check_secret_file(path: Path, what: str) -> None:
    """Refuse a secret file that is not a regular file or that group/others may touch."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise SecretError(f"{what}: secret file {path} does not exist") from None
    except OSError as exc:
        raise SecretError(f"{what}: cannot stat secret file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SecretError(f"{what}: secret file {path} is not a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise SecretError(f"{what}: secret file {path} has mode {mode:04o}: a secret file must not be "
                          f"readable or writable by group or others (chmod 600 {path})")


def load_secret(env_name: str | None, file: Path | None, env: Mapping[str, str],
                what: str) -> Secret | None:
    """The secret named by an environment variable or held in a file; None if neither."""
    if env_name:
        value = env.get(env_name, "")
        if not value.strip():
            raise SecretError(f"{what}: environment variable ${env_name} is not set or empty")
        return Secret(value.strip(), f"${env_name}")
    if file is None:
        return None
    path = Path(file)
    check_secret_file(path, what)
    try:
        value = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise SecretError(f"{what}: cannot read secret file {path}: {reason}") from None
    if not value:
        raise SecretError(f"{what}: secret file {path} is empty")
    return Secret(value, str(path))


def fragments(value: str) -> list[str]:
    """The secret and the parts of it a library may echo alone (a URL's path, password)."""
    found = [value]
    parts = urlsplit(value) if "://" in value else None
    if parts is not None and parts.netloc:
        tail = parts.path + (f"?{parts.query}" if parts.query else "")
        found += [tail, parts.password or ""]
        found += [seg for seg in re.split(r"[/?&=]", tail) if len(seg) >= _MIN_FRAGMENT]
    return sorted({f for f in found if len(f) >= 4}, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[Secret] = ()) -> str:
    """`text` with every known secret (and anything token-shaped) masked."""
    for secret in secrets:
        for fragment in fragments(secret.reveal()):
            text = text.replace(fragment, MASK)
    return scrub_text(text)


class ScrubFilter(logging.Filter):
    """Masks secrets in the records of a logger we do not own (a library's), before any
    handler formats them. Holds the secrets seen so far by the channels that use it."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[Secret] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage(), self.secrets)
        record.args = None
        if record.exc_info:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info), self.secrets)
            record.exc_info = None
        return True


def guard_logger(logger: logging.Logger, secrets: Iterable[Secret]) -> logging.Logger:
    """Attach (once) a ScrubFilter to `logger` and teach it `secrets`. Filters act only on
    records logged on that very logger, so name the library's module logger exactly."""
    found = next((f for f in logger.filters if isinstance(f, ScrubFilter)), None)
    if found is None:
        found = ScrubFilter()
        logger.addFilter(found)
    found.secrets.update(secrets)
    return logger


def private_logger(name: str, secrets: Iterable[Secret]) -> logging.Logger:
    """A logger handed to a library (slack_sdk logs full URLs, and a webhook URL is a
    secret): not registered globally, propagates to `notifiers.<...>`, always scrubbed."""
    logger = logging.Logger(name)
    logger.parent = logging.getLogger(name.rsplit(".", 1)[0])
    logger.setLevel(logging.INFO)
    return guard_logger(logger, secrets)
