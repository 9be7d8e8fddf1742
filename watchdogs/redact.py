"""Masking secrets in text we print: the core rules, below everything that prints.

Two rules: a value under a key named like a secret (`password`, `token`, `webhook_url`,
`auth_token`, `api_key`, ...) is masked whatever it looks like; any other text has its
token-shaped parts masked (Slack webhook paths, xox tokens, user:password@ in URLs,
Bearer/Basic credentials). Keys that only *name* where a secret lives (`token_env`,
`password_file`) are not secrets.
"""
from __future__ import annotations

import re
from typing import Any

MASK = "***"

PATTERNS = (
    (re.compile(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[^\s'\"<>)]+"), r"\1" + MASK),
    (re.compile(r"\bxox[a-z]-[A-Za-z0-9-]+"), "xox?-" + MASK),
    (re.compile(r"\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@", re.IGNORECASE), r"\1" + MASK + "@"),
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 " + MASK),
)
_SECRET_WORDS = re.compile(r"passw|passphrase|secret|token|webhook|auth|api_?key|credential|"
                           r"private_?key|cookie|signing", re.IGNORECASE)
_NAMES_A_PLACE = re.compile(r"_(env|file|path|header|scheme|user|username)$", re.IGNORECASE)


def is_secret_key(key: object) -> bool:
    """`password`, `smtp_token`, `webhook_url`, `Authorization`: yes. `token_env`: no."""
    return isinstance(key, str) and bool(_SECRET_WORDS.search(key)) and not _NAMES_A_PLACE.search(key)


def scrub_text(text: str) -> str:
    """`text` with token-shaped parts masked."""
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return text


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
