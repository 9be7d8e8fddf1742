"""Helpers shared by the network channels: secret-key rules, HTTP error classification."""
from __future__ import annotations

import errno
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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


_ERRNO_WORDS = {errno.ECONNREFUSED: "connection refused", errno.ECONNRESET: "connection reset",
                errno.EHOSTUNREACH: "no route to host", errno.ENETUNREACH: "network unreachable",
                errno.ETIMEDOUT: "timed out", errno.ECONNABORTED: "connection aborted",
                errno.EPIPE: "connection closed"}


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps, outermost first: requests wraps urllib3's MaxRetryError
    (in args), which wraps NewConnectionError (`.reason`), which wraps the socket error."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 20:
        current = todo.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        todo += [c for c in (getattr(current, "reason", None), current.__cause__, current.__context__,
                             *current.args) if isinstance(c, BaseException)]
    return seen


def network_words(exc: BaseException, url: str, timeout: float | None = None) -> str:
    """A failed HTTP request in words, naming the host and port and never the URL's path or
    query (a library's text echoes them: `Max retries exceeded with url: /x?token=...`):
    "cannot connect to host:9: connection refused"."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    where = f"{parts.hostname or '?'}:{port}"
    chain = _causes(exc)
    names = {type(e).__name__ for e in chain}
    within = f" within {timeout:g} s" if timeout else ""
    if isinstance(exc, TimeoutError) or names & {"ReadTimeout", "ReadTimeoutError"}:
        return f"{where} accepted the connection but did not answer{within}"
    if names & {"ConnectTimeout", "ConnectTimeoutError", "timeout", "TimeoutError"}:
        return f"cannot connect to {where}: no answer{within}"
    if any(isinstance(e, socket.gaierror) for e in chain):
        return f"cannot connect to {where}: host name not found"
    if names & {"SSLError", "SSLCertVerificationError"}:
        ssl_error = next((e for e in chain if type(e).__name__ == "SSLCertVerificationError"), None)
        why = getattr(ssl_error, "verify_message", "") or "handshake failed"
        return f"cannot connect to {where}: TLS {why}"
    if "ProxyError" in names:
        # The failing connection is the proxy's, not the target's: name it, or a tired reader
        # goes looking at a server that was never reached.
        proxy = _connected_to(chain)
        return (f"cannot reach the proxy {proxy or ''} for {where}: "
                f"{_errno_words(chain) or 'the proxy refused'}").replace("proxy  for", "proxy for")
    words = _errno_words(chain)
    if words:
        return f"cannot connect to {where}: {words}"
    if names & {"ConnectionError", "NewConnectionError", "MaxRetryError", "URLError"}:
        return f"cannot connect to {where}"
    if names & {"ChunkedEncodingError", "ProtocolError", "RemoteDisconnected", "IncompleteRead"}:
        return f"{where} closed the connection before answering in full"
    return f"request to {where} failed: {type(exc).__name__}"


def _connected_to(chain: list[BaseException]) -> str:
    """host:port of the connection urllib3 was making when it failed (its errors carry it)."""
    for e in chain:
        conn = getattr(e, "conn", None)
        host, port = getattr(conn, "host", None), getattr(conn, "port", None)
        if isinstance(host, str) and host:
            return f"{host}:{port}" if port else host
    return ""


def _errno_words(chain: list[BaseException]) -> str:
    for e in chain:
        if isinstance(e, OSError) and e.errno is not None:
            return _ERRNO_WORDS.get(e.errno) or (e.strerror or "").lower()
    return ""
