"""Changes from other processes (silence, ack, resolve, ending a silence) as command files
that the one writer of the state database applies.

A command is a JSON file created under a unique name (time, host, pid, random) in
`<state_dir>/inbox/`: written to a hidden temporary name, fsynced, then renamed into place,
so the writer never sees half of one, and two commands never share a name, whatever host
they come from. The writer applies each in its own transaction, then writes the result to
`inbox/done/<name>` (the same way) and only then removes the command: a crash in between
applies it again, which every command tolerates (a silence carries its own id, an ack or a
resolve of what is already so changes nothing). The sender waits for the result file.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INBOX = "inbox"
DONE = "done"
KEEP_DONE_S = 86400.0
VERBS = ("silence", "ack", "expire", "resolve")


@dataclass(frozen=True)
class Command:
    name: str
    """The file name: unique across hosts, and in time order."""
    verb: str
    args: dict[str, Any] = field(default_factory=dict)
    author: str = ""
    host: str = ""
    created: float = 0.0


@dataclass(frozen=True)
class Outcome:
    ok: bool
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    applied_by: str = ""


def folder(state_dir: Path) -> Path:
    return Path(state_dir) / INBOX


def _write_atomically(path: Path, payload: dict[str, Any]) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, json.dumps(payload).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)


def submit(state_dir: Path, verb: str, args: dict[str, Any], author: str,
           now: float | None = None) -> Command:
    """Queue one command; raises OSError when the inbox cannot take it (the caller says so)."""
    if verb not in VERBS:
        raise ValueError(f"unknown command {verb!r}")
    now = time.time() if now is None else now
    host = socket.gethostname()
    name = f"{now:017.6f}-{host}-{os.getpid()}-{secrets.token_hex(4)}.json"
    inbox = folder(state_dir)
    (inbox / DONE).mkdir(parents=True, exist_ok=True, mode=0o700)
    command = Command(name, verb, dict(args), author, host, now)
    _write_atomically(inbox / name, {"verb": verb, "args": command.args, "author": author, "host": host,
                                     "created": now})
    return command


def pending(state_dir: Path, fresh: bool = False) -> list[Command]:
    """Queued commands, oldest first. One that cannot be read is returned as verb "bad"
    (its text as the reason), so the writer answers it rather than skipping it for ever.

    `fresh`: first change the folder through this client (create and remove a file). An
    NFS client may serve a folder's listing from its cache for up to `acdirmax` (60 s), and
    sshfs for its `dcache_timeout` (20 s), so a command written from another host stays
    unseen that long; a change made through this client drops the cached listing at once.
    """
    inbox = folder(state_dir)
    if fresh:
        _poke(inbox)
    try:
        names = sorted(n for n in os.listdir(inbox) if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        try:
            raw = json.loads((inbox / name).read_text())
            found.append(Command(name, str(raw["verb"]), dict(raw.get("args") or {}),
                                 str(raw.get("author", "")), str(raw.get("host", "")),
                                 float(raw.get("created", 0.0))))
        except FileNotFoundError:
            continue  # answered meanwhile
        except (OSError, ValueError, KeyError, TypeError) as exc:
            found.append(Command(name, "bad", {"error": str(exc)}))
    return found


def _poke(inbox: Path) -> None:
    probe = inbox / f".poke-{socket.gethostname()}-{os.getpid()}"
    with contextlib.suppress(OSError):  # a missing or full folder: the listing says what it can
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600))
        os.unlink(probe)


def answer(state_dir: Path, command: Command, outcome: Outcome) -> None:
    """Record the outcome, then drop the command (in this order: see the module doc)."""
    inbox = folder(state_dir)
    (inbox / DONE).mkdir(parents=True, exist_ok=True, mode=0o700)
    _write_atomically(inbox / DONE / command.name, {"ok": outcome.ok, "text": outcome.text,
                                                    "data": outcome.data, "applied_by": outcome.applied_by,
                                                    "at": time.time()})
    with contextlib.suppress(FileNotFoundError):
        (inbox / command.name).unlink()


def result(state_dir: Path, command: Command) -> Outcome | None:
    try:
        raw = json.loads((folder(state_dir) / DONE / command.name).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return Outcome(bool(raw["ok"]), str(raw["text"]), dict(raw.get("data") or {}),
                   str(raw.get("applied_by", "")))


def wait(state_dir: Path, command: Command, timeout: float, poll: float = 0.2) -> Outcome | None:
    """The outcome once the writer has applied the command; None after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        found = result(state_dir, command)
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(poll)


def withdraw(state_dir: Path, command: Command) -> bool:
    """Take a queued command back (True), unless the writer already has it."""
    try:
        (folder(state_dir) / command.name).unlink()
        return True
    except FileNotFoundError:
        return False


def prune_done(state_dir: Path, now: float) -> int:
    removed = 0
    done = folder(state_dir) / DONE
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(done):
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime > KEEP_DONE_S:
                    os.unlink(entry.path)
                    removed += 1
    return removed
