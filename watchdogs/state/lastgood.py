"""The last config that loaded, kept in the state directory.

When someone leaves a syntax error in watchdogs.toml at night, the next scheduler instance
cannot read its channels from it; it reads them from this copy instead and says "watchdogs
cannot load its config" through them. The copy is the file's bytes (mode 0600: it names
secret files and addresses), parsed as if it stood where the config stands, so relative
paths mean what they meant.
"""
from __future__ import annotations

import os
from pathlib import Path

NAME = "last-good-config.toml"


def path_in(state_dir: Path) -> Path:
    return Path(state_dir) / NAME


def save(state_dir: Path, source: bytes) -> bool:
    """Keep `source` as the last good config (atomically). False if it cannot be written
    (a full disk must not stop the scheduler: the previous copy stays)."""
    target = path_in(state_dir)
    temp = target.with_name(f".{NAME}.{os.getpid()}")
    try:
        if target.exists() and target.read_bytes() == source:
            return True
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(source)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, target)
        return True
    except OSError:
        temp.unlink(missing_ok=True)
        return False


def load(state_dir: Path) -> bytes | None:
    try:
        return path_in(state_dir).read_bytes()
    except OSError:
        return None
