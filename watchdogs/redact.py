"""Masking secrets in text we print: the core rules, below everything that prints.

Two rules: a value under a key named like a secret (`password`, `token`, `webhook_url`,
`auth_token`, `api_key`, ...) is masked whatever it looks like; any other text has its
token-shaped parts masked. Keys that only *name* where a secret lives (`token_env`,
`password_file`) are not secrets.

Token-shaped: in any URL, its user information (`user:password@`) and its query string
(`?token=...`, also where a library echoes only the path: `with url: /x?token=...`); for the
services whose URL *is* the credential, the path too (Slack, Discord, Microsoft Teams and
Power Automate webhooks, healthchecks.io and self-hosted healthchecks ping URLs); xox
tokens; Bearer/Basic credentials. The host and port stay: they say where, and are no secret.
"""
from __future__ import annotations

import re
from typing import Any

MASK = "***"

# Pattern texts, compiled by `re` on first use (and kept in its cache), not at import: most
# runs print no secret, and compiling these at every start costs ~2 ms.
_END = r"[^\s'\"<>)\]}]"
"""A character that may continue a URL in running text (quotes, brackets and spaces end it)."""
_TOKENS = (
    # Services whose URL path is the credential: keep the host, mask the path.
    (r"(hooks\.slack\.com/(?:services|workflows|triggers)/)" + _END + "+", r"\1" + MASK, 0),
    (r"(discord(?:app)?\.com/api/webhooks/)" + _END + "+", r"\1" + MASK, re.IGNORECASE),
    (r"(\.webhook\.office\.com/)" + _END + "+", r"\1" + MASK, re.IGNORECASE),
    (r"(outlook\.office(?:365)?\.com/webhook/)" + _END + "+", r"\1" + MASK, re.IGNORECASE),
    (r"(\.logic\.azure\.com(?::\d+)?/)" + _END + "+", r"\1" + MASK, re.IGNORECASE),
    (r"(hc-ping\.com/)" + _END + "+", r"\1" + MASK, re.IGNORECASE),
    (r"(://[^/\s'\"<>]+/ping/)" + _END + "+", r"\1" + MASK, re.IGNORECASE),  # healthchecks, self-hosted
    (r"\bxox[a-z]-[A-Za-z0-9-]+", "xox?-" + MASK, 0),
    # Any URL's user information, with or without a password.
    (r"\b([a-z][a-z0-9+.-]*://)[^/\s@'\"<>]+@", r"\1" + MASK + "@", re.IGNORECASE),
    # A query string: in a whole URL, or a path a library echoes alone ("url: /x?token=1").
    (r"(://[^\s?#'\"<>]*|(?<![^\s'\"(=:])/[^\s?#'\"<>]*)\?" + _END + "+", r"\1?" + MASK, 0),
    (r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", r"\1 " + MASK, 0),
)
_SECRET_WORDS = (r"passw|passphrase|secret|token|webhook|auth|api_?key|credential|"
                 r"private_?key|cookie|signing")
_NAMES_A_PLACE = r"_(env|file|path|header|scheme|user|username)$"


def is_secret_key(key: object) -> bool:
    """`password`, `smtp_token`, `webhook_url`, `Authorization`: yes. `token_env`: no."""
    return (isinstance(key, str) and re.search(_SECRET_WORDS, key, re.IGNORECASE) is not None
            and re.search(_NAMES_A_PLACE, key, re.IGNORECASE) is None)


def scrub_text(text: str) -> str:
    """`text` with token-shaped parts masked."""
    for pattern, replacement, flags in _TOKENS:
        text = re.sub(pattern, replacement, text, flags=flags)
    return text


def redact_url(url: str) -> str:
    """A URL as it may be shown (`notify-test`, `describe()`): scheme, host, port and, unless
    it is a known service's credential, the path; never user information or a query."""
    return scrub_text(url)


def redact(key: object, value: Any) -> Any:
    """A value safe to print under `key`: masked whole under a secret-like key, else with
    token-shaped parts masked; tables and lists are walked."""
    if is_secret_key(key) and value not in (None, "", "(missing)"):
        return MASK
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {k: redact(k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(None, v) for v in value)
    return value
