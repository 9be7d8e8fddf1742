from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.notifiers.fakes import FakeHTTP, SmtpServer, make_cert


@pytest.fixture(scope="session")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with SmtpServer() as server:
        yield server


@pytest.fixture
def http() -> Iterator[FakeHTTP]:
    with FakeHTTP() as server:
        yield server
