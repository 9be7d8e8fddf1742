"""The email channel against a real SMTP server (aiosmtpd) on loopback."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from notifiers.base import TransportError
from tests.notifiers.fakes import Blackhole, SmtpServer, free_port
from tests.notifiers.support import channel, event, render

MAIL = """
[[notify]]
name = "team-mail"
type = "email"
host = "127.0.0.1"
port = {port}
sender = "watchdogs@cluster.example.org"
to = ["ops@example.org", "ml-team@example.org"]
timeout = "2s"
{extra}
"""


def mail_channel(tmp_path: Path, port: int, extra: str = "", env: dict[str, str] | None = None):
    return channel(tmp_path, MAIL.format(port=port, extra=extra), env=env)


def test_plain_smtp_delivers_one_multipart_message_to_every_recipient(tmp_path: Path,
                                                                      smtp: SmtpServer) -> None:
    notifier = mail_channel(tmp_path, smtp.port)
    message = render(notifier, event(summary="job 4242 <FAILED> & gone"))
    notifier.notify(message)
    assert len(smtp.received) == 1
    got = smtp.received[0]
    assert got.rcpt_tos == ["ops@example.org", "ml-team@example.org"]
    mail = got.message
    assert mail["Message-ID"] == "<wd-test-key-0001@cluster.example.org>"
    assert mail["Subject"].startswith("[watchdogs cl1] CRITICAL: train-job")
    text = mail.get_body(("plain",)).get_content()
    html = mail.get_body(("html",)).get_content()
    for needed in ("job 4242 <FAILED> & gone", "job=4242 partition=debug", "oom_kill",
                   "https://wiki.example.org/runbooks/oom", "2024-05-01 11:53:00 UTC"):
        assert needed in text
    assert "job 4242 &lt;FAILED&gt; &amp; gone" in html and "<FAILED>" not in html


def test_starttls_with_login_reads_the_password_from_a_private_file(tmp_path: Path,
                                                                    cert: tuple[Path, Path]) -> None:
    secret = tmp_path / "smtp-password"
    secret.write_text("s3cret-pass\n")
    secret.chmod(0o600)
    extra = (f'starttls = true\nusername = "bot"\npassword_file = "{secret}"\nca_file = "{cert[0]}"')
    with SmtpServer(tls=cert, users={"bot": "s3cret-pass"}) as server:
        notifier = mail_channel(tmp_path, server.port, extra)
        notifier.notify(render(notifier))
    assert [r.login for r in server.received] == ["bot"]


def test_a_refused_login_is_a_permanent_error_that_never_shows_the_password(
        tmp_path: Path, cert: tuple[Path, Path]) -> None:
    extra = f'starttls = true\nusername = "bot"\npassword_env = "SMTP_PW"\nca_file = "{cert[0]}"'
    with SmtpServer(tls=cert, users={"bot": "right"}) as server:
        notifier = mail_channel(tmp_path, server.port, extra, env={"SMTP_PW": "wrong-pass-123"})
        with pytest.raises(TransportError) as caught:
            notifier.notify(render(notifier))
    assert caught.value.permanent and "535" in caught.value.message
    assert "wrong-pass-123" not in caught.value.message and not server.received


def test_an_untrusted_certificate_is_refused(tmp_path: Path, cert: tuple[Path, Path]) -> None:
    with SmtpServer(tls=cert) as server:
        notifier = mail_channel(tmp_path, server.port, "starttls = true")
        with pytest.raises(TransportError) as caught:
            notifier.notify(render(notifier))
    assert caught.value.permanent and "certificate" in caught.value.message
    assert not server.received


def test_a_down_server_is_a_quick_transient_error(tmp_path: Path) -> None:
    notifier = mail_channel(tmp_path, free_port())
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert not caught.value.permanent and "refused" in caught.value.message.lower()
    assert time.monotonic() - started < 2


def test_a_server_that_never_answers_costs_at_most_the_timeout(tmp_path: Path) -> None:
    with Blackhole() as hole:
        notifier = mail_channel(tmp_path, hole.port)
        started = time.monotonic()
        with pytest.raises(TransportError) as caught:
            notifier.notify(render(notifier))
        elapsed = time.monotonic() - started
    assert not caught.value.permanent
    assert 1.5 < elapsed < 4, elapsed
