"""The email channel through a `sendmail` program (transport = "sendmail"): Debian's msmtp
as that program, relaying to the tests' aiosmtpd mailbox with a per-test msmtprc. What is
asserted is the message the mailbox received."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from notifiers.base import TransportError
from tests.notifiers.fakes import SmtpServer, free_port
from tests.notifiers.support import channel, config, event, render
from watchdogs.errors import ConfigError

MSMTP = shutil.which("msmtp") or "/usr/bin/msmtp"
pytestmark = pytest.mark.skipif(not Path(MSMTP).exists(),
                                reason="msmtp is not installed (make test-tools installs Debian's msmtp)")


@pytest.fixture
def msmtprc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """msmtp reads $XDG_CONFIG_HOME/msmtp/config when ~/.msmtprc does not exist: both point
    into this test's folder, so the user's own mail setup is never used."""
    home = tmp_path / "home"
    (home / "msmtp").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))

    def write(port: int) -> Path:
        rc = home / "msmtp" / "config"
        rc.write_text(f"defaults\nauth off\ntls off\naccount default\nhost 127.0.0.1\nport {port}\n"
                      "from watchdogs@cluster.example\n")
        rc.chmod(0o600)
        return rc
    return write


def mail_channel(tmp_path: Path, to: str = '["ops@example.org", "-oQ/tmp/x@example.org"]',
                 program: str = MSMTP):
    return channel(tmp_path, f"""
    [[notify]]
    name = "mail"
    type = "email"
    transport = "sendmail"
    sendmail = "{program}"
    sender = "watchdogs@cluster.example"
    to = {to}
    timeout = "10s"
    """)


def test_sendmail_delivers_the_message_with_its_envelope(tmp_path: Path, smtp: SmtpServer, msmtprc) -> None:
    """A recipient that looks like an option stays a recipient: it comes after `--`."""
    msmtprc(smtp.port)
    notifier = mail_channel(tmp_path)
    notifier.notify(render(notifier, event()))
    [got] = smtp.received
    assert got.mail_from == "watchdogs@cluster.example"
    assert got.rcpt_tos == ["ops@example.org", "-oQ/tmp/x@example.org"]
    mail = got.message
    assert mail["Subject"] == "[watchdogs cl1] CRITICAL: train-job - job 4242 FAILED (exit 1)"
    assert mail["Message-ID"] == "<wd-test-key-0001@cluster.example>"
    assert mail["Auto-Submitted"] == "auto-generated"
    body = mail.get_body(("plain",))
    assert body is not None and "job 4242 FAILED" in body.get_content()
    assert notifier.describe() == f"email to ops@example.org, -oQ/tmp/x@example.org via {MSMTP}"


def test_a_line_with_a_lone_dot_does_not_cut_the_message(tmp_path: Path, smtp: SmtpServer, msmtprc) -> None:
    msmtprc(smtp.port)
    notifier = mail_channel(tmp_path, to='"ops@example.org"')
    notifier.notify(render(notifier, event(summary="disk full", details=("before", ".", "after the dot"))))
    body = smtp.received[0].message.get_body(("plain",))
    assert body is not None and "after the dot" in body.get_content()


def test_a_relay_that_is_down_is_a_transient_failure(tmp_path: Path, msmtprc) -> None:
    msmtprc(free_port())
    notifier = mail_channel(tmp_path, to='"ops@example.org"')
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert not caught.value.permanent
    assert "exit 75 (EX_TEMPFAIL)" in caught.value.message and "Connection refused" in caught.value.message


class _RefuseRecipients:
    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: Any) -> str:  # aiosmtpd's hook name
        return "550 5.1.1 no such user here"


def test_a_refused_recipient_is_a_permanent_failure_with_the_servers_words(tmp_path: Path, msmtprc) -> None:
    port = free_port()
    controller = Controller(_RefuseRecipients(), hostname="127.0.0.1", port=port, server_hostname="localhost")
    controller.start()
    try:
        msmtprc(port)
        notifier = mail_channel(tmp_path, to='"ghost@example.org"')
        with pytest.raises(TransportError) as caught:
            notifier.notify(render(notifier))
    finally:
        controller.stop()
    assert caught.value.permanent, caught.value.message
    assert "no such user here" in caught.value.message


def test_a_missing_program_is_permanent_and_named(tmp_path: Path) -> None:
    notifier = mail_channel(tmp_path, to='"ops@example.org"', program=str(tmp_path / "no-sendmail"))
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert caught.value.permanent and "no-sendmail: no such program" in caught.value.message


def test_smtp_settings_with_the_sendmail_transport_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, """
        [[notify]]
        name = "mail"
        type = "email"
        transport = "sendmail"
        sender = "w@x.org"
        to = "ops@example.org"
        starttls = true
        """)
    assert 'notify "mail"' in str(caught.value) and "starttls" in str(caught.value)
    assert "sendmail" in str(caught.value)
