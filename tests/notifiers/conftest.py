from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.notifiers.fakes import FakeHTTP, SmtpServer, make_cert
from tests.notifiers.proxies import OnlyThroughProxy, Tinyproxy


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


@pytest.fixture
def tinyproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tinyproxy]:
    with Tinyproxy(tmp_path_factory.mktemp("proxy")) as proxy:
        yield proxy


@pytest.fixture
def behind_proxy() -> Iterator[OnlyThroughProxy]:
    with OnlyThroughProxy() as server:
        yield server


@pytest.fixture
def no_env_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the machine's environment says about proxies is not this test's business."""
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
