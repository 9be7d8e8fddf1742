"""The `apprise` channel against real local endpoints: the real Apprise library posts to a
local HTTP server standing for an ntfy server and for a generic JSON webhook; the tests
assert the bytes Apprise sent, and how failures are classified for the outbox."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from notifiers.base import Message, TransportError
from tests.notifiers.fakes import FakeHTTP
from tests.notifiers.support import channel, config, event, render
from watchdogs.errors import ConfigError

PASSWORD = "hook-secret-pw-7f3a9c"


def apprise_channel(tmp_path: Path, options: str, env: dict[str, str] | None = None):
    return channel(tmp_path, f"""
    [[notify]]
    name = "chat"
    type = "apprise"
    timeout = "5s"
    {options}
    """, env=env or {})


def host(http: FakeHTTP) -> str:
    return http.url.removeprefix("http://")


def secret_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "apprise-urls"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_an_ntfy_url_publishes_title_and_text_as_ntfy_json(tmp_path: Path, http: FakeHTTP) -> None:
    notifier = apprise_channel(tmp_path, f'urls = ["ntfy://{host(http)}/hpc-alerts"]')
    message = render(notifier, event())
    notifier.notify(message)
    [sent] = http.seen
    # ntfy's JSON publishing: POST to the server's root, the topic in the body.
    assert (sent.method, sent.path, sent.headers["content-type"]) == ("POST", "/", "application/json")
    assert sent.body == json.dumps({"topic": "hpc-alerts", "title": message.subject,
                                    "message": message.text.strip()}).encode()
    assert message.subject.startswith("[watchdogs cl1]") and "job 4242 FAILED" in message.text


def test_json_urls_from_a_0600_file_post_apprise_json_with_basic_auth(tmp_path: Path, http: FakeHTTP) -> None:
    urls = secret_file(tmp_path, f"# the team's hooks\njson://ops:{PASSWORD}@{host(http)}/hooks/a\n"
                                 f"json://{host(http)}/hooks/b\n")
    notifier = apprise_channel(tmp_path, f'urls_file = "{urls}"')
    assert PASSWORD not in notifier.describe()
    message = render(notifier, event(status="WARNING", previous="OK"))
    notifier.notify(message)
    assert [s.path for s in http.seen] == ["/hooks/a", "/hooks/b"]
    first = http.seen[0]
    assert first.headers["authorization"] == "Basic " + base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
    assert "authorization" not in http.seen[1].headers
    assert first.body == json.dumps({"version": "1.0", "title": message.subject,
                                     "message": message.text.strip(), "attachments": [],
                                     "type": "warning"}).encode()


def test_urls_from_an_environment_variable(tmp_path: Path, http: FakeHTTP) -> None:
    env = {"CHAT_URLS": f"json://{host(http)}/one, json://{host(http)}/two"}
    notifier = apprise_channel(tmp_path, 'urls_env = "CHAT_URLS"', env=env)
    notifier.notify(render(notifier, event(state="resolved", status="OK", previous="CRITICAL")))
    assert [(s.path, s.json()["type"]) for s in http.seen] == [("/one", "success"), ("/two", "success")]


@pytest.mark.parametrize("status, permanent", [(503, False), (500, False), (429, False),
                                               (404, True), (401, True), (400, True)])
def test_server_errors_are_transient_and_client_errors_permanent(tmp_path: Path, http: FakeHTTP,
                                                                 status: int, permanent: bool) -> None:
    http.reply(status, "refused")
    notifier = apprise_channel(tmp_path, f'urls = ["json://{host(http)}/hook"]')
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert caught.value.permanent is permanent and f"HTTP {status}" in caught.value.message
    assert caught.value.done == ()


def test_an_unreachable_service_is_transient(tmp_path: Path) -> None:
    notifier = apprise_channel(tmp_path, 'urls = ["json://127.0.0.1:9/hook"]')   # discard port: refused
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert not caught.value.permanent and "Connection error" in caught.value.message


def test_a_partly_failed_round_is_retried_only_for_the_services_that_failed(tmp_path: Path,
                                                                            http: FakeHTTP) -> None:
    http.reply(200, "ok")
    http.reply(502, "bad gateway")
    urls = secret_file(tmp_path, f"json://ops:{PASSWORD}@{host(http)}/a json://{host(http)}/b")
    notifier = apprise_channel(tmp_path, f'urls = ["ntfy://{host(http)}/t"]\n    urls_file = "{urls}"')
    message = render(notifier)
    with pytest.raises(TransportError) as caught:
        notifier.notify(message)
    assert not caught.value.permanent and caught.value.done == ("urls[1]", "urls_file[2]")
    assert "urls_file[1]" in caught.value.message and PASSWORD not in caught.value.message
    notifier.notify(Message(**{**message.__dict__, "done": caught.value.done}))
    assert [s.path for s in http.seen] == ["/", "/a", "/b", "/a"]       # the retry: /a alone


def test_a_secret_file_others_can_read_is_refused_without_printing_it(tmp_path: Path) -> None:
    urls = secret_file(tmp_path, f"json://ops:{PASSWORD}@127.0.0.1:9/a", mode=0o644)
    with pytest.raises(ConfigError) as caught:
        apprise_channel(tmp_path, f'urls_file = "{urls}"')
    text = str(caught.value)
    assert "0644" in text and "chmod 600" in text and PASSWORD not in text


def test_an_unknown_url_scheme_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, """
        [[notify]]
        name = "chat"
        type = "apprise"
        urls = ["nosuchservice://x/y"]
        """)
    assert "'urls'" in str(caught.value) and "nosuchservice://x/y" in str(caught.value)
    assert "Apprise URL" in str(caught.value)


def test_a_channel_without_urls_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, '[[notify]]\nname = "chat"\ntype = "apprise"\n')
    assert "urls, urls_env or urls_file" in str(caught.value)
