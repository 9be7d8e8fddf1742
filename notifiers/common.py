"""Helpers shared by the network channels: secret-key rules, HTTP error classification."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from notifiers.base import TransportError
from notifiers.secrets import check_secret_file
from watchdogs.errors import SecretError

RETRYABLE_HTTP = frozenset({408, 425, 429, 500, 502, 503, 504})


def secret_pair_problems(values: Mapping[str, Any], env_key: str, file_key: str,
                         required: bool = False) -> list[tuple[str, Any, str]]:
    """At most one of (env, file); `required` wants exactly one; an unsafe file is named now
    (relative paths are checked when first read, as the config's folder is not known here)."""
    env_value, file_value = values.get(env_key), values.get(file_key)
    if env_value and file_value:
        return [(file_key, str(file_value), f"either {env_key} or {file_key}, not both")]
    if required and not (env_value or file_value):
        return [(env_key, None, f"{env_key} or {file_key} (the secret is never written in the config)")]
    if isinstance(file_value, Path) and file_value.is_absolute():
        try:
            check_secret_file(file_value, "secret file")
        except SecretError as exc:
            return [(file_key, str(file_value), str(exc).removeprefix("secret file: "))]
    return []


def string_map(value: Any) -> Mapping[str, str]:
    """A TOML table of strings, e.g. HTTP headers."""
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    raise ValueError('a table of strings, such as { "X-Team" = "ml" }')


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a Retry-After header given in seconds (the HTTP-date form is ignored)."""
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def http_failure(where: str, status: int, body: str, headers: Mapping[str, str]) -> TransportError:
    """A refused HTTP request: 429/5xx/408 are worth retrying, other 4xx are not."""
    text = " ".join(body.split())[:300]
    return TransportError(f"{where}: HTTP {status}: {text}", permanent=status not in RETRYABLE_HTTP
                          and 400 <= status < 500, retry_after=retry_after(headers))
