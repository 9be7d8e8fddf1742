"""The last config that loaded, kept in the state directory.

When someone leaves a syntax error in watchdogs.toml at night, the next scheduler instance
cannot read its channels from it; it reads them from this copy instead and says "watchdogs
cannot load its config" through them. The copy is the file's bytes (mode 0600: it names
secret files and addresses), parsed as if it stood where the config stands, so relative
paths mean what they meant.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from watchdogs import ownfiles

NAME = "last-good-config.toml"


def path_in(state_dir: Path) -> Path:
    return Path(state_dir) / NAME


def save(state_dir: Path, source: bytes) -> bool:
    """Keep `source` as the last good config (atomically). False if it cannot be written
    (a full disk must not stop the scheduler: the previous copy stays)."""
    target = path_in(state_dir)
    try:
        if target.exists() and target.read_bytes() == source:
            return True
        ownfiles.write_atomic(target, source, 0o600)
        return True
    except OSError:
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
        ownfiles.make_dirs(entry.parent)
        ownfiles.write_atomic(entry, str(state_dir).encode(), 0o600)
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
