"""Real local servers for the channel tests: an SMTP server (aiosmtpd, optionally STARTTLS
with AUTH), an HTTP server that answers like Slack/Twilio/a webhook receiver and records
the exact bytes it was sent, and a "blackhole" that accepts TCP and never answers."""
from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_cert(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1/localhost, made with the openssl CLI."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    login: str | None

    @property
    def message(self) -> EmailMessage:
        return message_from_bytes(self.data, policy=default_policy)  # type: ignore[return-value]  # why: default_policy yields an EmailMessage


class _Collector:
    def __init__(self, box: SmtpServer) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd's name
        login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else None
        self.box.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos),
                                          envelope.original_content or envelope.content, login))
        return "250 OK"


class SmtpServer:
    """aiosmtpd on 127.0.0.1:port. With `tls` (cert, key): STARTTLS required, and AUTH
    (only over TLS) accepting `users`."""

    def __init__(self, port: int | None = None, tls: tuple[Path, Path] | None = None,
                 users: dict[str, str] | None = None) -> None:
        import ssl

        self.port = port or free_port()
        self.received: list[Received] = []
        kwargs: dict[str, Any] = {}
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            kwargs |= {"tls_context": context, "require_starttls": True}
        if users is not None:
            kwargs |= {"authenticator": self._authenticate, "auth_require_tls": tls is not None,
                       "auth_required": True}
        self.users = users or {}
        # server_hostname: else aiosmtpd asks DNS for its FQDN on every connection (~0.1 s here).
        self.controller = Controller(_Collector(self), hostname="127.0.0.1", port=self.port,
                                     server_hostname="localhost", **kwargs)

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str,
                      auth_data: Any) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and \
            self.users.get(auth_data.login.decode()) == auth_data.password.decode()
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    def __enter__(self) -> SmtpServer:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes | str | dict[str, Any] = b"ok"
    headers: dict[str, str] = field(default_factory=dict)


class FakeHTTP:
    """A local HTTP server. Requests are recorded in `seen`; replies are taken from the
    `script` queue, then `default` (200 "ok", as a Slack webhook answers)."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.script: list[Reply] = []
        self.default = Reply()
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def reply(self, status: int, body: bytes | str | dict[str, Any], times: int = 1,
              **headers: str) -> None:
        self.script += [Reply(status, body, {k.replace("_", "-"): v for k, v in headers.items()})] * times

    def _next(self, seen: Seen) -> Reply:
        with self._lock:
            self.seen.append(seen)
            return self.script.pop(0) if self.script else self.default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                reply = fake._next(Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                                        body))
                data = reply.body
                if isinstance(data, dict):
                    data = json.dumps(data)
                payload = data.encode() if isinstance(data, str) else data
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return None

        return Handler

    def __enter__(self) -> FakeHTTP:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class Blackhole:
    """Accepts TCP connections and never says a word: a hung SMTP server."""

    def __init__(self, port: int | None = None) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port or 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def __enter__(self) -> Blackhole:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for conn in self.accepted:
            conn.close()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self.sock.close()
