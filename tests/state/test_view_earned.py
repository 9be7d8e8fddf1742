"""A state view that is empty, damaged, cut off or not a regular file never reads as "all is
well" (issue 35 item 7): `status` is UNKNOWN or CRITICAL with the reason, `alerts` exits 3
instead of "No open alerts", and no reader blocks on a FIFO. The real commands, as the
user runs them; a view written by a real `run --once`, then spoiled the way a full disk, a
bad copy or someone else would."""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import unix_socket_at
from tests.scheduler.conftest import Site, script
from watchdogs.state import snapshot

LOGFILE = '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n'


def _empty(view: Path) -> None:
    view.write_bytes(b"")


def _cut(view: Path) -> None:
    data = view.read_bytes()
    view.write_bytes(data[:4096])


def _noise(view: Path) -> None:
    view.write_bytes(os.urandom(8192))


def _folder(view: Path) -> None:
    view.unlink()
    view.mkdir()


def _fifo(view: Path) -> None:
    view.unlink()
    os.mkfifo(view)


def _link(view: Path) -> None:
    other = view.parent / "other.sqlite3"
    shutil.copy(view, other)
    view.unlink()
    view.symlink_to(other)


def _socket(view: Path) -> None:
    view.unlink()
    with unix_socket_at(view):
        pass


def _no_alert_table(view: Path) -> None:
    db = sqlite3.connect(view)
    db.execute("DROP TABLE alert_state")
    db.commit()
    db.close()


def _no_meta(view: Path) -> None:
    db = sqlite3.connect(view)
    db.execute("DELETE FROM view_meta")
    db.commit()
    db.close()


SPOILED: dict[str, tuple[Callable[[Path], None], int, str]] = {
    # name: (how, status's exit code, words status says)
    "empty": (_empty, 3, "is empty (0 bytes)"),
    "cut off": (_cut, 3, "is cut off: 4096 of"),
    "random bytes": (_noise, 3, "is not an SQLite database"),
    "a folder": (_folder, 2, "is a folder, not a regular file"),
    "a FIFO": (_fifo, 2, "is a FIFO, not a regular file"),
    "a socket": (_socket, 2, "is a socket, not a regular file"),
    "a symlink": (_link, 2, "is a symbolic link, not a regular file"),
    "no alert_state table": (_no_alert_table, 3, "is damaged: no alert_state table"),
    "no view_meta row": (_no_meta, 3, "it does not say when it was taken"),
}


@pytest.fixture
def recorded(site: Site) -> Site:
    """A view with one open CRITICAL alert in it, written by a real `run --once`."""
    site.write_config(LOGFILE)
    site.dropin("fire", script("echo 'disk on fire'\nexit 2"))
    assert site.watchdogs("run", "--once").returncode == 2
    assert (site.state / snapshot.VIEW_NAME).stat().st_size > 0
    return site


def run(site: Site, *args: str) -> subprocess.CompletedProcess[str]:
    # A reader that blocked (a FIFO opened by SQLite) would raise TimeoutExpired here.
    return site.watchdogs(*args, timeout=20)


@pytest.mark.parametrize("spoil", list(SPOILED), ids=list(SPOILED))
def test_a_view_that_is_empty_damaged_or_special_never_reads_as_ok(recorded: Site, spoil: str) -> None:
    how, code, words = SPOILED[spoil]
    how(recorded.state / snapshot.VIEW_NAME)
    status = run(recorded, "status")
    first = status.stdout.splitlines()[0]
    assert status.returncode == code, status.stdout + status.stderr
    assert first.startswith(("WATCHDOGS UNKNOWN: ", "WATCHDOGS CRITICAL: "))
    assert "state view unusable" in first
    assert words in first and "Traceback" not in status.stderr
    assert "0 open alerts" not in first  # not known: not said
    alerts = run(recorded, "alerts")
    assert alerts.returncode == 3, alerts.stdout + alerts.stderr
    assert "No open alerts" not in alerts.stdout and "state view unusable" in alerts.stdout
    assert words in alerts.stdout


def test_the_same_view_whole_reads_as_before(recorded: Site) -> None:
    """The control: the unspoiled view gives the open alert (and the CRITICAL it earns)."""
    status = run(recorded, "status")
    assert status.returncode == 2 and "1 open alert (1 CRITICAL)" in status.stdout.splitlines()[0]
    assert "view_ok=1" in status.stdout.splitlines()[0]
    assert "Open alerts (1)" in run(recorded, "alerts").stdout


def test_inspect_names_the_kind_without_opening_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / snapshot.VIEW_NAME
    os.mkfifo(fifo)
    found = snapshot.inspect(fifo)  # would block forever if it opened the FIFO for reading
    assert found is not None and found.kind == "special" and found.replaced
    assert snapshot.inspect(tmp_path / "absent.sqlite3") is None
