"""Fixtures for the watchdog-watches-itself tests: a site (config, cron.d, state), a real
SMTP server (aiosmtpd), a local HTTP server standing for healthchecks.io, and a real small
tmpfs to fill with dd."""
from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import tmpfs as helpers_tmpfs
from tests.notifiers.fakes import FakeHTTP, SmtpServer
from tests.scheduler.conftest import Site
from tests.scheduler.conftest import site as site


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A HOME of the test's own: the default state folder and the per-user index of chains
    live under it, and must be neither read from nor left behind in the real one."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with SmtpServer() as server:
        yield server


@pytest.fixture
def hc() -> Iterator[FakeHTTP]:
    """healthchecks.io on 127.0.0.1: answers 200 "OK" to every ping, records method, path, body."""
    with FakeHTTP() as server:
        server.default.body = b"OK"
        yield server


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs, mounted by root (tests/privileged.py) and owned by the test user."""
    with helpers_tmpfs(tmp_path / "scratch", "2m") as point:
        yield point


def fill(folder: Path) -> Path:
    """dd until the filesystem is full (dd exits non-zero with ENOSPC: that is the point)."""
    target = folder / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=64k"], capture_output=True, check=False)
    return target


def mail_config(site: Site, smtp: SmtpServer, scheduler: str = "", tables: str = "") -> None:
    """The site's config ([scheduler] keys added) with one email channel to `smtp`, then `tables`."""
    site.write_config(scheduler)
    with site.config.open("a") as fh:
        fh.write(f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {smtp.port}\n'
                 'sender = "watchdogs@example.org"\nto = ["oncall@example.org"]\nhtml = false\n' + tables)


def mails(smtp: SmtpServer) -> list[str]:
    """Subject and text of every mail received."""
    out = []
    for received in smtp.received:
        message = received.message
        body = message.get_body(("plain",))
        out.append(f"{message['Subject']}\n{body.get_content() if body is not None else ''}")
    return out


def ping_id() -> str:
    return str(uuid.uuid4())
