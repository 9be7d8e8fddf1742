"""Text from outside (argv, file names, hang frames, old records) made safe to write and
show: trainguard's own copy of the watchdog's `textsafe` rules, which it may not import.

Python hands undecodable bytes of argv and of file names over as lone surrogates
(`surrogateescape`), and `json` gives any `\\udXXX` back as one: such a str cannot be
encoded, so a write of it fails and ends what was writing. Each is turned once into the
visible `\\xNN` of its byte (`\\udXXX` for a surrogate that was never a byte), which any
encoder takes and a reader still sees.
"""
from __future__ import annotations

import re
from typing import Any

# A lone surrogate from surrogateescape (a byte 0x80-0xff) or from JSON (any other).
_SURROGATE = re.compile("[\ud800-\udfff]")
# What a single-line value must not hold: C0 and C1 controls, DEL, and the line and
# paragraph separators that `str.splitlines` (and terminals) treat as line breaks.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _byte(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def _control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def from_os(text: str) -> str:
    """`text` with every lone surrogate shown as the byte it stood for (`\\xe9`)."""
    if text.isascii():   # the common case costs one scan
        return text
    return _SURROGATE.sub(_byte, text)


def from_bytes(data: bytes) -> str:
    """Bytes decoded as UTF-8, every byte that is not shown as `\\xNN`."""
    return data.decode("utf-8", "backslashreplace")


def one_line(text: str, limit: int = 0) -> str:
    """`from_os(text)` with control characters and line breaks escaped (so a value cannot
    forge a `key=value` line or a log line), cut to `limit` characters (0: no limit)."""
    out = _CONTROL.sub(_control, from_os(text))
    if limit and len(out) > limit:
        out = out[: max(0, limit - 3)] + "..."
    return out


def clean(value: Any) -> Any:
    """A JSON-like value with every str in it (keys too) passed through `from_os`."""
    if isinstance(value, str):
        return from_os(value)
    if isinstance(value, dict):
        return {from_os(str(k)): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value
