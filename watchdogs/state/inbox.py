"""Changes from other processes (silence, ack, resolve, ending a silence) as command files
that the one writer of the state database applies.

A command is a JSON file created under a unique name (time, host, pid, random) in
`<state_dir>/inbox/`: written to a hidden temporary name, fsynced, then renamed into place,
so the writer never sees half of one, and two commands never share a name, whatever host
they come from. The writer applies each in its own transaction, then writes the result to
`inbox/done/<name>` (the same way) and only then removes the command: a crash in between
applies it again, which every command tolerates (a silence carries its own id, an ack or a
resolve of what is already so changes nothing). The sender waits for the result file.

The inbox is a trust boundary (docs/trust.md): a group member may be able to write into it
(a shared project space). So a command is only taken from a regular file owned by you,
opened without following a link and without blocking (a FIFO would hang the scheduler),
and its author is the file's owner, never what its content claims. Anything else (a FIFO,
a folder, a symlink, a socket, another user's file, an oversized one) is moved aside into
`inbox/rejected/` and reported (`Queue.set_aside`); when even that fails it is skipped and
reported, never retried in a way that blocks the entries after it. An inbox folder that
others can write is not read at all (`Queue.refused`).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import pwd
import secrets
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdogs import ownfiles, trust

INBOX = "inbox"
DONE = "done"
REJECTED = "rejected"
MAX_COMMAND_BYTES = 64 * 1024
"""A command is a few hundred bytes; a bigger file is not read (set aside)."""
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
class SetAside:
    """An inbox entry that is not a command of yours: what it was, whose, where it went."""

    name: str
    kind: str
    owner: str
    why: str
    moved_to: str | None
    """Its new path in inbox/rejected/, or None when it could not be moved (then it is
    skipped at every look, without blocking the others, until someone removes it)."""

    def __str__(self) -> str:
        where = f"moved to {self.moved_to}" if self.moved_to else "could not be moved aside; skipped"
        return f"{self.name!r}: {self.kind} of {self.owner} ({self.why}); {where}"


def in_words(entries: list[SetAside] | tuple[SetAside, ...]) -> str:
    """What was set aside, by owner: "a FIFO, 2 symlinks of wdpeer (uid 1002)"."""
    owners: dict[str, dict[str, int]] = {}
    for entry in entries:
        kinds = owners.setdefault(entry.owner, {})
        kinds[entry.kind] = kinds.get(entry.kind, 0) + 1
    return "; ".join(", ".join(kind if n == 1 else f"{n} {kind.removeprefix('a ').removeprefix('an ')}s"
                               for kind, n in kinds.items()) + f" of {owner}"
                     for owner, kinds in owners.items())


@dataclass(frozen=True)
class Queue:
    """One look at the inbox: the commands to apply (oldest first), what was set aside,
    and why the folder itself was not read (others can write it), if so."""

    commands: tuple[Command, ...] = ()
    set_aside: tuple[SetAside, ...] = ()
    refused: str | None = None

    def __bool__(self) -> bool:
        return bool(self.commands or self.set_aside or self.refused)


@dataclass(frozen=True)
class Outcome:
    ok: bool
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    applied_by: str = ""


def folder(state_dir: Path) -> Path:
    return Path(state_dir) / INBOX


def _write_atomically(path: Path, payload: dict[str, Any]) -> None:
    # mkstemp in the folder, then rename: a name planted by someone else is never written
    # through, and never blocks the write either (the temporary name is random).
    ownfiles.write_atomic(path, json.dumps(payload).encode())


def submit(state_dir: Path, verb: str, args: dict[str, Any], author: str,
           now: float | None = None) -> Command:
    """Queue one command; raises OSError when the inbox cannot take it (the caller says so)."""
    if verb not in VERBS:
        raise ValueError(f"unknown command {verb!r}")
    now = time.time() if now is None else now
    host = socket.gethostname()
    name = f"{now:017.6f}-{host}-{os.getpid()}-{secrets.token_hex(4)}.json"
    inbox = folder(state_dir)
    ownfiles.make_dirs(inbox / DONE)
    command = Command(name, verb, dict(args), author, host, now)
    _write_atomically(inbox / name, {"verb": verb, "args": command.args, "author": author, "host": host,
                                     "created": now})
    return command


def take(state_dir: Path, fresh: bool = False, now: float | None = None) -> Queue:
    """One look at the inbox: the queued commands, oldest first, each from a regular file
    of yours; every other entry moved aside (see the module doc). A command that cannot be
    parsed is returned as verb "bad" (its error as the reason), so the writer answers it
    rather than skipping it for ever.

    `fresh`: first change the folder through this client (create and remove a file). An
    NFS client may serve a folder's listing from its cache for up to `acdirmax` (60 s), and
    sshfs for its `dcache_timeout` (20 s), so a command written from another host stays
    unseen that long; a change made through this client drops the cached listing at once.
    """
    inbox = folder(state_dir)
    if not os.path.lexists(inbox):
        return Queue()
    problem = trust.distrust(inbox)
    if problem is not None:
        return Queue(refused=f"the inbox is not read: {problem}")
    if fresh:
        _poke(inbox)
    try:
        fd = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return Queue(refused=f"the inbox {inbox} cannot be opened: {exc.strerror or exc}")
    try:
        names = sorted(n for n in os.listdir(fd) if n.endswith(".json") and not n.startswith("."))
        found, aside = [], []
        for name in names:
            entry = _read_entry(inbox, fd, name, time.time() if now is None else now)
            if isinstance(entry, SetAside):
                aside.append(entry)
            elif entry is not None:
                found.append(entry)
        return Queue(tuple(found), tuple(aside))
    finally:
        os.close(fd)


def _read_entry(inbox: Path, fd: int, name: str, now: float) -> Command | SetAside | None:
    """The command in entry `name`, or why it was set aside; None when it went meanwhile."""
    try:
        got = trust.open_entry(fd, name, limit=MAX_COMMAND_BYTES)
    except FileNotFoundError:
        return None  # answered or withdrawn meanwhile
    except OSError as exc:
        return Command(name, "bad", {"error": f"cannot read it: {exc.strerror or exc}"})
    if isinstance(got, trust.Refused):
        return _set_aside(inbox, fd, name, got, now)
    try:
        raw = json.loads(got.decode("utf-8"), parse_constant=_no_constant)
        if not isinstance(raw, dict) or not isinstance(raw.get("args", {}), dict):
            raise ValueError("not a command object")
        created = float(raw.get("created", 0.0))
        if not math.isfinite(created):
            raise ValueError("created is not a finite time")
        # The author is who owns the file (open_entry took only a file of yours); what its
        # content claims is not evidence.
        return Command(name, str(raw["verb"]), dict(raw.get("args") or {}), _user_name(os.getuid()),
                       str(raw.get("host", "")), created)
    except (ValueError, KeyError, TypeError) as exc:
        return Command(name, "bad", {"error": str(exc)})


def _no_constant(word: str) -> float:
    raise ValueError(f"{word} is not a number a command may carry")


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _set_aside(inbox: Path, fd: int, name: str, refused: trust.Refused, now: float) -> SetAside:
    """Move a refused entry into inbox/rejected/ (a rename: never follows a link, works for
    a FIFO or a folder). A rename that fails (a filesystem that refuses it, a folder we
    may not change) leaves it in place: it is reported and skipped, never blocks."""
    rejected = inbox / REJECTED
    moved: str | None = None
    try:
        ownfiles.make_dirs(rejected)
        dest = f"{name}.{now:.6f}"
        os.rename(name, rejected / dest, src_dir_fd=fd)
        moved = shown(str(rejected / dest))
    except OSError:
        moved = None
    return SetAside(shown(name), refused.kind, refused.owner, refused.why, moved)


def shown(name: str) -> str:
    """A file name as text that any database, file or terminal takes: bytes that are not
    UTF-8 (a name from `os.listdir` holds them as lone surrogates) shown as `\\xNN`."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def rejected_entries(state_dir: Path) -> list[str]:
    """The names in inbox/rejected/ (what was set aside and not yet cleaned up)."""
    try:
        return sorted(os.listdir(folder(state_dir) / REJECTED))
    except OSError:
        return []


def set_aside_earlier(state_dir: Path) -> list[SetAside]:
    """What lies in inbox/rejected/ now (set aside by an earlier look, perhaps by a command
    that applied the queue itself, with nobody told yet): its kind and owner (lstat)."""
    rejected = folder(state_dir) / REJECTED
    found = []
    for name in rejected_entries(state_dir):
        try:
            st = os.lstat(rejected / name)
        except OSError:
            continue
        found.append(SetAside(shown(name), trust.kind_of(st.st_mode), trust.owner_name(st.st_uid),
                              "set aside earlier", shown(str(rejected / name))))
    return found


def _poke(inbox: Path) -> None:
    probe = inbox / f".poke-{socket.gethostname()}-{os.getpid()}"
    with contextlib.suppress(OSError):  # a missing or full folder: the listing says what it can
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600))
        os.unlink(probe)


def answer(state_dir: Path, command: Command, outcome: Outcome) -> None:
    """Record the outcome, then drop the command (in this order: see the module doc)."""
    inbox = folder(state_dir)
    ownfiles.make_dirs(inbox / DONE)
    _write_atomically(inbox / DONE / command.name, {"ok": outcome.ok, "text": outcome.text,
                                                    "data": outcome.data, "applied_by": outcome.applied_by,
                                                    "at": time.time()})
    with contextlib.suppress(FileNotFoundError):
        (inbox / command.name).unlink()


def result(state_dir: Path, command: Command) -> Outcome | None:
    """The writer's answer to `command`, once there. Read like a command (a regular file of
    yours, no link, no blocking): a FIFO planted at the name must not hang the sender."""
    try:
        fd = os.open(folder(state_dir) / DONE, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        got = trust.open_entry(fd, command.name, limit=MAX_COMMAND_BYTES)
        if isinstance(got, trust.Refused):
            return None
        raw = json.loads(got)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
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
