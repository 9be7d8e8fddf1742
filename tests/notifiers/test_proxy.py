"""Every HTTP channel and the dead man's switch get off the node through an HTTP proxy:
the environment's https_proxy/http_proxy/no_proxy, or the channel's `proxy` key.

The proxy is a real tinyproxy; the target server accepts only connections coming from the
proxy's outgoing address (tests/notifiers/proxies.py), so a request that reached it went
through the proxy, and the proxy's own log names it."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from notifiers.base import TransportError
from tests.notifiers.fakes import free_port
from tests.notifiers.proxies import PROXY_SOURCE, OnlyDirect, OnlyThroughProxy, Tinyproxy
from tests.notifiers.support import channel, config, render
from watchdogs.errors import ConfigError
from watchdogs.scheduler.deadman import DeadMansSwitch

pytestmark = pytest.mark.usefixtures("no_env_proxy")


def webhook(tmp_path: Path, url: str, extra: str = ""):
    return channel(tmp_path, f"""
    [[notify]]
    name = "hook"
    type = "webhook"
    url = "{url}/hooks/ops"
    timeout = "5s"
    {extra}
    """)


def slack_webhook(tmp_path: Path, url: str, extra: str = ""):
    return channel(tmp_path, f"""
    [[notify]]
    name = "team"
    type = "slack"
    webhook_url_env = "SLACK_HOOK"
    base_url = "{url}"
    max_retries = 0
    timeout = "5s"
    {extra}
    """, env={"SLACK_HOOK": "https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX"})


def went_through(proxy: Tinyproxy, server: OnlyThroughProxy, path: str) -> None:
    assert server.refused == [], "a connection reached the server without the proxy"
    assert [s.path for s in server.seen] == [path]
    assert "tinyproxy" in server.seen[0].headers.get("via", "")
    assert any(path in line for line in proxy.requests()), proxy.requests()


def test_the_target_refuses_a_request_that_bypasses_the_proxy(tmp_path: Path,
                                                              behind_proxy: OnlyThroughProxy) -> None:
    """The test's premise: without a proxy the delivery fails, so passing tests mean the proxy."""
    notifier = webhook(tmp_path, behind_proxy.url)
    with pytest.raises(TransportError):
        notifier.notify(render(notifier))
    assert behind_proxy.refused == ["127.0.0.1"] and behind_proxy.seen == []


def test_webhook_goes_through_http_proxy_from_the_environment(
        tmp_path: Path, tinyproxy: Tinyproxy, behind_proxy: OnlyThroughProxy,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", tinyproxy.url)
    notifier = webhook(tmp_path, behind_proxy.url)
    notifier.notify(render(notifier))
    went_through(tinyproxy, behind_proxy, "/hooks/ops")
    assert behind_proxy.seen[0].json()["severity"] == "critical"


def test_webhook_goes_through_its_proxy_key(tmp_path: Path, tinyproxy: Tinyproxy,
                                            behind_proxy: OnlyThroughProxy) -> None:
    notifier = webhook(tmp_path, behind_proxy.url, f'proxy = "{tinyproxy.url}"')
    notifier.notify(render(notifier))
    went_through(tinyproxy, behind_proxy, "/hooks/ops")


def test_no_proxy_sends_webhook_and_slack_straight_to_the_server(
        tmp_path: Path, tinyproxy: Tinyproxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", tinyproxy.url)
    monkeypatch.setenv("http_proxy", tinyproxy.url)
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")
    with OnlyDirect() as server:
        for notifier in (webhook(tmp_path, server.url), slack_webhook(tmp_path, server.url)):
            notifier.notify(render(notifier))
        assert server.refused == [] and len(server.seen) == 2
    assert tinyproxy.requests() == []


def test_slack_webhook_goes_through_the_proxy_from_the_environment(
        tmp_path: Path, tinyproxy: Tinyproxy, behind_proxy: OnlyThroughProxy,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", tinyproxy.url)  # the test server speaks http, not https
    notifier = slack_webhook(tmp_path, behind_proxy.url)
    notifier.notify(render(notifier))
    went_through(tinyproxy, behind_proxy, "/services/T000/B000/XXXXsecretXXXX")
    assert behind_proxy.seen[0].json()["blocks"][0]["type"] == "header"


def test_slack_bot_token_goes_through_its_proxy_key(tmp_path: Path, tinyproxy: Tinyproxy,
                                                    behind_proxy: OnlyThroughProxy) -> None:
    behind_proxy.reply(200, {"ok": True, "channel": "C1", "ts": "1.2"})
    notifier = channel(tmp_path, f"""
    [[notify]]
    name = "bot"
    type = "slack"
    token_env = "SLACK_TOKEN"
    channel = "#train-alerts"
    base_url = "{behind_proxy.url}/api/"
    proxy = "{tinyproxy.url}"
    max_retries = 0
    """, env={"SLACK_TOKEN": "xoxb-not-a-real-token"})
    notifier.notify(render(notifier))
    went_through(tinyproxy, behind_proxy, "/api/chat.postMessage")


def test_sms_goes_through_its_proxy_key(tmp_path: Path, tinyproxy: Tinyproxy,
                                        behind_proxy: OnlyThroughProxy) -> None:
    behind_proxy.reply(201, {"sid": "SM1", "status": "queued"})
    sid = "AC0123456789abcdef0123456789abcdef"
    notifier = channel(tmp_path, f"""
    [[notify]]
    name = "pager"
    type = "sms"
    account_sid = "{sid}"
    auth_token_env = "TWILIO_TOKEN"
    from_number = "+15559990000"
    to = ["+15550001111"]
    base_url = "{behind_proxy.url}"
    proxy = "{tinyproxy.url}"
    """, env={"TWILIO_TOKEN": "tw-secret-token-42"})
    notifier.notify(render(notifier))
    went_through(tinyproxy, behind_proxy, f"/2010-04-01/Accounts/{sid}/Messages.json")


def test_apprise_goes_through_the_proxy_from_the_environment(
        tmp_path: Path, tinyproxy: Tinyproxy, behind_proxy: OnlyThroughProxy,
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("apprise")
    monkeypatch.setenv("http_proxy", tinyproxy.url)
    port = behind_proxy.server.server_address[1]
    notifier = channel(tmp_path, f"""
    [[notify]]
    name = "chat"
    type = "apprise"
    urls = ["json://127.0.0.1:{port}/hooks/chat"]
    """)
    notifier.notify(render(notifier))
    went_through(tinyproxy, behind_proxy, "/hooks/chat")


def test_apprise_refuses_a_proxy_key_and_says_where_the_proxy_goes(tmp_path: Path) -> None:
    pytest.importorskip("apprise")
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, """
        [[notify]]
        name = "chat"
        type = "apprise"
        urls = ["json://127.0.0.1:9/x"]
        proxy = "http://proxy.example.org:3128"
        """)
    assert 'notify "chat"' in str(caught.value) and "https_proxy" in str(caught.value)


def test_a_proxy_key_with_a_password_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        webhook(tmp_path, "http://example.org", 'proxy = "http://me:hunter2@proxy.example.org:3128"')
    assert "without a password" in str(caught.value) and "hunter2" not in str(caught.value)


def test_a_dead_proxy_is_a_transient_failure(tmp_path: Path, behind_proxy: OnlyThroughProxy) -> None:
    notifier = webhook(tmp_path, behind_proxy.url, f'proxy = "http://127.0.0.1:{free_port()}"')
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert not caught.value.permanent and "ProxyError" in caught.value.message
    assert behind_proxy.seen == []


def _deadman_pings(switch: DeadMansSwitch, server: OnlyThroughProxy) -> None:
    assert switch.fail("disk full")
    switch.wait(10)
    deadline = time.monotonic() + 10
    while not server.seen and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_dead_mans_switch_goes_through_heartbeat_proxy(
        tmp_path: Path, tinyproxy: Tinyproxy, behind_proxy: OnlyThroughProxy) -> None:
    cfg = config(tmp_path, f"""
    heartbeat_url = "{behind_proxy.url}/ping/abc-uuid"
    heartbeat_proxy = "{tinyproxy.url}"
    """)
    settings = cfg.scheduler
    switch = DeadMansSwitch(settings.heartbeat_url, proxy=settings.heartbeat_proxy, timeout=5)
    _deadman_pings(switch, behind_proxy)
    went_through(tinyproxy, behind_proxy, "/ping/abc-uuid/fail")
    assert behind_proxy.seen[0].body == b"disk full" and switch.failed == 0


def test_the_dead_mans_switch_goes_through_the_environments_proxy(
        tinyproxy: Tinyproxy, behind_proxy: OnlyThroughProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", tinyproxy.url)
    switch = DeadMansSwitch(f"{behind_proxy.url}/ping/abc-uuid", timeout=5)
    _deadman_pings(switch, behind_proxy)
    went_through(tinyproxy, behind_proxy, "/ping/abc-uuid/fail")
    assert PROXY_SOURCE not in behind_proxy.refused


def test_an_https_webhook_tunnels_through_the_proxy_with_connect(
        tmp_path: Path, tinyproxy: Tinyproxy, cert: tuple[Path, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What Slack and Twilio need in real life: CONNECT, then TLS end to end through the tunnel."""
    import ssl

    monkeypatch.setenv("https_proxy", tinyproxy.url)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert[0]), str(cert[1]))
    with OnlyThroughProxy() as server:
        server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
        port = server.server.server_address[1]
        notifier = webhook(tmp_path, f"https://127.0.0.1:{port}", f'ca_file = "{cert[0]}"')
        notifier.notify(render(notifier))
        assert server.refused == [] and [s.path for s in server.seen] == ["/hooks/ops"]
    assert any(f"CONNECT 127.0.0.1:{port}" in line for line in tinyproxy.requests()), tinyproxy.requests()
