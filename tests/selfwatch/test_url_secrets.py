"""A secret inside a URL never leaves the config, and a drop-in that prints a channel's
password does not get it past the watchdog: a real failing run (a webhook to a closed
port, one to a real HTTP server answering 500, a real SMTP server with a login, the
logfile channel), then every output, every delivered message and every command searched."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.notifiers.fakes import FakeHTTP, SmtpServer, free_port
from tests.scheduler.conftest import Site, script
from tests.selfwatch.conftest import mails

PASSWORD = "Smtp-Pa55word-7781"
SECRETS = ("PWinURL-5521", "TokInQuery-9912", "SigInQuery-3381", "QueryFromDropin-4410", PASSWORD,
           "DropinUserPw-6620")


@pytest.fixture
def smtp_login() -> Iterator[SmtpServer]:
    with SmtpServer(users={"wd": PASSWORD}) as server:
        yield server


def leaky_site(site: Site, smtp: SmtpServer, http: FakeHTTP) -> Path:
    secret_file = site.root / "smtp-password"
    secret_file.write_text(PASSWORD + "\n")
    secret_file.chmod(0o600)
    logfile = site.root / "alerts.log"
    site.write_config('[alerts]\nchannel_down_after = "1s"\n')
    with site.config.open("a") as fh:
        fh.write(
            f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {smtp.port}\n'
            f'sender = "wd@example.org"\nto = ["oncall@example.org"]\nhtml = false\nusername = "wd"\n'
            f'password_file = "{secret_file}"\n'
            f'[[notify]]\nname = "wh"\ntype = "webhook"\n'
            f'url = "http://user:{SECRETS[0]}@127.0.0.1:{free_port()}/x?token={SECRETS[1]}"\n'
            f'[[notify]]\nname = "wh2"\ntype = "webhook"\nurl = "{http.url}/hook?sig={SECRETS[2]}"\n'
            f'[[notify]]\nname = "log"\ntype = "logfile"\npath = "{logfile}"\n')
    site.dropin("leaky", script(
        f"echo 'CRITICAL - login with {PASSWORD} at https://u:{SECRETS[5]}@db.example.org/q?key={SECRETS[3]}'"
        "\nexit 2"))
    return logfile


@pytest.mark.timeout(120)
def test_no_secret_from_a_url_or_a_password_in_any_output_or_delivered_message(
        site: Site, smtp_login: SmtpServer) -> None:
    with FakeHTTP() as http:
        http.default.status = 500
        http.default.body = f"no such hook: /hook?sig={SECRETS[2]}"  # a server that echoes the URL
        logfile = leaky_site(site, smtp_login, http)
        proc = site.popen("run")
        try:
            wait_for(lambda: any("alert channel wh " in m for m in mails(smtp_login)), timeout=60,
                     what="the news that channel wh fails, told on the mail channel")
        finally:
            proc.terminate()
            proc.wait(20)
        outputs = [site.log()]
        for argv in (["status"], ["status", "--json"], ["alerts", "--history", "50"],
                     ["alerts", "--json", "--history", "50"], ["notify-test", "wh"],
                     ["notify-test", "wh", "--json"], ["notify-test", "wh2"], ["run", "--once"],
                     ["run", "--once", "--json"], ["validate"]):
            done = site.watchdogs(*argv)
            assert "Traceback" not in done.stderr, done.stderr
            outputs.append(f"$ {argv}\n{done.stdout}\n{done.stderr}")
        delivered = [r.data.decode(errors="replace") for r in smtp_login.received]
        delivered += [s.body.decode(errors="replace") for s in http.seen]
        delivered.append(logfile.read_text())
    everything = "\n".join(outputs + delivered)
    for secret in SECRETS:
        assert secret not in everything, f"{secret} leaked: " + next(
            t for t in outputs + delivered if secret in t)[:3000]
    # ... and what was said instead is in words, with the host and port.
    assert "cannot connect to 127.0.0.1:" in everything and "connection refused" in everything
    assert "HTTPConnectionPool" not in everything and "Max retries" not in everything
    notify_test = next(o for o in outputs if o.startswith("$ ['notify-test', 'wh']"))
    assert "http://***@127.0.0.1:" in notify_test and "/x?***" in notify_test
    assert len(http.seen) >= 1 and "login with ***" in http.seen[0].json()["text"]


@pytest.mark.timeout(60)
def test_notify_test_json_says_where_without_the_secret(site: Site) -> None:
    site.write_config()
    with site.config.open("a") as fh:
        fh.write('[[notify]]\nname = "teams"\ntype = "webhook"\n'
                 'url = "https://example.webhook.office.com/webhookb2/TeamsPath-1188@x/IncomingWebhook/y"\n'
                 'timeout = "1s"\n')
    done = site.watchdogs("notify-test", "teams", "--json")
    data = json.loads(done.stdout)
    assert "TeamsPath-1188" not in done.stdout + done.stderr
    assert data["destination"] == "JSON POST to https://example.webhook.office.com/***"
    assert data["delivered"] is False
