"""Text from outside (drop-in output, Slurm's answers, file names, silence reasons) made
safe to show: control characters made visible, every field bounded.

A terminal obeys escape sequences (ESC, the 8-bit CSI 0x9b), a carriage return overwrites
what a line said, a newline forges a second line in a line-based log, and the Unicode
direction overrides (U+202A-U+202E, U+2066-U+2069) reorder what a reader sees. Each is
shown as a backslash escape instead (`\\x1b`, `\\r`, `\\u202e`), so the text stays
greppable and nothing is lost. One pattern, used by every place that shows such text: the
command line's output, log records, the logfile channel, mail headers and bodies, Slack.

Bytes that are not UTF-8 (a Latin-1 file name, a job name, what a drop-in prints) are
decoded once where they come in (`from_bytes`, or `from_os` for a str the OS decoded with
surrogateescape) into text that shows each such byte as `\\xNN`: it can then be stored
(sqlite, JSON and files refuse lone surrogates), sent and shown, and nothing is lost.
"""
from __future__ import annotations

import logging
import re

_CONTROLS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
             "\ud800-\udfff")
"""Every C0 control but tab and newline, DEL, every C1 control, the line/paragraph
separators, the bidirectional overrides and isolates, the zero-width no-break space, and
lone surrogates (a boundary that forgot `from_os`: shown, never a failed write)."""
_SURROGATES = re.compile("[\ud800-\udfff]")
_NAMED = {"\r": "\\r", "\x1b": "\\x1b", "\n": "\\n", "\t": "\\t"}

FIELD_LIMIT = 4000
"""Characters of one outside field shown (a summary, a detail value, a reason); a 50 MB
line from a drop-in becomes this much and a note of how much more there was."""


def _escape(match: re.Match[str]) -> str:
    return _escape_char(match.group())


def control_characters(text: str) -> str:
    """The control characters `text` holds (line breaks and tabs included), shown: "'\\r', '\\n'"."""
    found = sorted(set(re.findall(f"[{_CONTROLS}\n\t]", text)))
    return ", ".join(f"'{_escape_char(c)}'" for c in found)


def _escape_char(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for one undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def from_bytes(data: bytes) -> str:
    """Bytes from outside as text: UTF-8, each byte that is not shown as `\\xNN`."""
    return data.decode("utf-8", "backslashreplace")


def from_os(text: str) -> str:
    """A str that came from the OS (a file name, argv, an environment value: decoded with
    surrogateescape) or from JSON (`"\\udce9"`), made storable: each lone surrogate that
    stands for a byte becomes `\\xNN` (that byte), any other becomes `\\udXXX`. Text that
    is already clean is returned as it is (the common case, checked without copying)."""
    if text.isascii() or _SURROGATES.search(text) is None:
        return text
    return _SURROGATES.sub(_escape, text)


def visible(text: str, newlines: bool = True) -> str:
    """`text` with control characters shown as escapes. `newlines=True` keeps line breaks
    and tabs (a multi-line body, a terminal page); False also escapes them (one line)."""
    pattern = f"[{_CONTROLS}]" if newlines else f"[{_CONTROLS}\n\t]"
    if re.search(pattern, text) is None:  # the common case: nothing to do, nothing copied
        return text
    return re.sub(pattern, _escape, text)


def one_line(text: str, limit: int = FIELD_LIMIT) -> str:
    """One field on one line: control characters and line breaks escaped, bounded."""
    return bounded(visible(text, newlines=False), limit)


def bounded(text: str, limit: int = FIELD_LIMIT) -> str:
    """At most `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def safe_output(text: str, hidden: tuple[str, ...] = ()) -> str:
    """What a command prints: known secret values masked (`hidden`, and those the channels
    built in this process have read: `hide_in_logs`), token-shaped parts (URL user
    information and queries, webhook paths) masked, control characters made visible."""
    from watchdogs.redact import MASK, scrub_text

    for value in sorted(set(hidden) | _registered(), key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, MASK)
    return visible(scrub_text(text))


class SafeRecords(logging.Filter):
    """On a log handler: each record's message with secrets masked and control characters
    escaped, so one record is one line (a drop-in's name or output cannot forge a second).
    `hidden` holds the secret values the channels have read (see `hide_in_logs`)."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        safe = visible(safe_output(message, tuple(self.hidden)), newlines=False)
        if safe != message:
            record.msg, record.args = safe, None
        return True


def masked(text: str) -> str:
    """`text` with the secrets the channels of this process have read, and anything
    token-shaped, masked (control characters kept: see `visible` for showing it)."""
    from watchdogs.redact import MASK, scrub_text

    for value in sorted(_registered(), key=len, reverse=True):
        text = text.replace(value, MASK)
    return scrub_text(text)


def _registered() -> set[str]:
    return {v for handler in logging.getLogger().handlers for f in handler.filters
            if isinstance(f, SafeRecords) for v in f.hidden}


def hide_in_logs(values: tuple[str, ...]) -> None:
    """Teach the SafeRecords filters of the root logger's handlers these secret values: a
    drop-in that prints the SMTP password must not put it into the scheduler's log."""
    for handler in logging.getLogger().handlers:
        for found in handler.filters:
            if isinstance(found, SafeRecords):
                found.hidden.update(v for v in values if len(v) >= 4)
