"""A real HTTP proxy for the tests: Debian's tinyproxy, on a free loopback port, sending
its outgoing connections from 127.0.0.3 (`Bind`), and a target server that takes only
connections from that address. A request that went straight to the server is refused
there; one that went through the proxy carries tinyproxy's Via header and is in its log.

tinyproxy is installed by `make test-tools` (Debian package `tinyproxy`)."""
from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.notifiers.fakes import FakeHTTP, free_port

PROXY_SOURCE = "127.0.0.3"
"""The address tinyproxy's outgoing connections come from; the clients' come from 127.0.0.1."""


class Tinyproxy:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.log = folder / "tinyproxy.log"
        self.conf = folder / "tinyproxy.conf"
        self.conf.write_text(
            f"Port {self.port}\nListen 127.0.0.1\nBind {PROXY_SOURCE}\nTimeout 30\n"
            f'LogFile "{self.log}"\nLogLevel Info\nMaxClients 20\nAllow 127.0.0.1\n'
            # No ConnectPort line: CONNECT (https) to any port, as a site proxy for Slack does.
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[str]:
        """tinyproxy's "Request" log lines: one per request it forwarded (method and URL)."""
        if not self.log.exists():
            return []
        return [line for line in self.log.read_text(errors="replace").splitlines() if "Request (" in line]

    def __enter__(self) -> Tinyproxy:
        program = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
        if not Path(program).exists():
            pytest.skip("tinyproxy is not installed (make test-tools installs Debian's tinyproxy)")
        # -d: stay in the foreground, so the fixture owns the process and its end.
        self.proc = subprocess.Popen([program, "-d", "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return self
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"tinyproxy exited {self.proc.returncode}: {err}")
            time.sleep(0.05)
        raise RuntimeError("tinyproxy did not listen within 10 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class OnlyThroughProxy(FakeHTTP):
    """The target: refuses (closes) every connection that does not come from the proxy."""

    def __init__(self, source: str = PROXY_SOURCE) -> None:
        super().__init__()
        self.refused: list[str] = []

        def verify_request(request: Any, client_address: Any) -> bool:
            if client_address[0] == source:
                return True
            self.refused.append(client_address[0])
            return False

        self.server.verify_request = verify_request  # type: ignore[method-assign]  # why: per-instance admission rule


class OnlyDirect(FakeHTTP):
    """The target for no_proxy: refuses every connection that comes from the proxy."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[str] = []

        def verify_request(request: Any, client_address: Any) -> bool:
            if client_address[0] != PROXY_SOURCE:
                return True
            self.refused.append(client_address[0])
            return False

        self.server.verify_request = verify_request  # type: ignore[method-assign]  # why: per-instance admission rule
