"""Probe classes for the state (issue 27 item 1, issue 28 item 5): a state database
corrupt at any depth under every command, an unreadable state view, junk in the inbox of
queued changes. Run with the rest by benchmarks/probes.py."""
from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from probe_cases import BASE, Outcome, Probe

FAILING = "#!/bin/sh\necho 'disk on fire'\nexit 2\n"
LOG = '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n'
COMMANDS = {"run --once": ["run", "--once"], "status": ["status"], "alerts": ["alerts"],
            "silences": ["silences"], "silence": ["silence", "x*", "--for", "1h"], "ack": ["ack", "*"],
            "resolve": ["resolve", "*", "--reason", "probe"]}


def _filled(root: Path) -> Path:
    """A state database of many pages: three runs of a failing drop-in and a silence."""
    hourly = root / "cron.d" / "cron.hourly" / "fire"
    hourly.write_text(FAILING)
    hourly.chmod(0o700)
    env = {**os.environ, "WATCHDOGS_CONFIG": str(root / "watchdogs.toml")}
    for argv in (["run", "--once"],) * 3 + (["silence", "keep-*", "--for", "1h"],):
        subprocess.run([sys.executable, "-m", "watchdogs", *argv], cwd=root, env=env, capture_output=True,
                       timeout=120, check=False)
    for suffix in ("-wal", "-shm"):
        (root / "state" / f"state.sqlite3{suffix}").unlink(missing_ok=True)
    return root / "state" / "state.sqlite3"


def _scribble(from_page: int) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        db = _filled(root)
        data = bytearray(db.read_bytes())
        size = int.from_bytes(data[16:18], "big") or 65536
        pages = len(data) // size
        rng = random.Random(from_page)
        for page in range(min(from_page, pages - 1), pages):
            data[page * size + (100 if page == 0 else 0):(page + 1) * size] = rng.randbytes(
                size - (100 if page == 0 else 0))
        db.write_bytes(bytes(data))
    return setup


def _told_if_once(command: str) -> Callable[[Path, Sequence[Outcome]], str | None]:
    """No traceback (checked by the harness); `run --once` also tells the channels."""
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        if command != "run --once":
            text = outs[0].out + outs[0].err
            return None if outs[0].code is not None else f"no answer: {text[-100:]}"
        log = (root / "alerts.log").read_text() if (root / "alerts.log").exists() else ""
        told = [line for line in log.splitlines() if "watchdogs:state" in line and "corrupt" in line]
        return None if told else "the channels were not told about the corrupt database"
    return check


def _view_garbage(root: Path) -> None:
    _filled(root)
    (root / "state" / "view.sqlite3").write_bytes(b"\0garbage" * 512)


def _inbox_junk(root: Path) -> None:
    _filled(root)
    inbox = root / "state" / "inbox"
    inbox.mkdir(exist_ok=True, mode=0o700)
    (inbox / "0000000001.000000-elsewhere-1-deadbeef.json").write_text("{not json")


def _junk_answered(root: Path, outs: Sequence[Outcome]) -> str | None:
    left = list((root / "state" / "inbox").glob("*.json"))
    return None if not left else f"a bad command file was left unanswered: {left[0].name}"


def _state_probes() -> list[Probe]:
    probes = []
    for depth in (2, 3, 6):
        for name, argv in COMMANDS.items():
            probes.append(Probe("state", f"corrupt from page {depth}: {name}", BASE + LOG, [[argv]],
                                _told_if_once(name), setup=_scribble(depth), timeout=90))
    probes.append(Probe("state", "unreadable state view: status", BASE + LOG, [[["status"]]],
                        lambda r, o: None if o[0].code is not None else "no answer", setup=_view_garbage))
    probes.append(Probe("state", "junk command file in the inbox", BASE + LOG,
                        [[["silence", "y*", "--for", "1h"]]], _junk_answered, setup=_inbox_junk))
    return probes


PROBES: list[Probe] = _state_probes()
