"""The last config that loaded, kept in the state directory.

When someone leaves a syntax error in watchdogs.toml at night, the next scheduler instance
cannot read its channels from it; it reads them from this copy instead and says "watchdogs
cannot load its config" through them. The copy is the file's bytes (mode 0600: it names
secret files and addresses), parsed as if it stood where the config stands, so relative
paths mean what they meant.
"""
from __future__ import annotations

import hashlib
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


def index_entry(config_path: Path, index_dir: Path) -> Path:
    """Where the state folder of the chain run from `config_path` is noted, in a fixed
    per-user place: found again when the config itself cannot be read to say so."""
    key = hashlib.sha256(str(config_path.expanduser().absolute()).encode()).hexdigest()[:16]
    return index_dir / "chains" / key


def note_state_dir(config_path: Path, state_dir: Path, index_dir: Path) -> None:
    entry = index_entry(config_path, index_dir)
    try:
        if entry.exists() and entry.read_text() == str(state_dir):
            return
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        entry.write_text(str(state_dir))
    except OSError:
        pass  # only a help for `stop` with an unreadable config; never worth a failure


def noted_state_dir(config_path: Path, index_dir: Path) -> Path | None:
    try:
        return Path(index_entry(config_path, index_dir).read_text().strip())
    except OSError:
        return None


def load(state_dir: Path) -> bytes | None:
    try:
        return path_in(state_dir).read_bytes()
    except OSError:
        return None
