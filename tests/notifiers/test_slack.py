"""The Slack channel through slack_sdk against a local server answering like Slack."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from notifiers.base import TransportError
from tests.notifiers.fakes import FakeHTTP, free_port
from tests.notifiers.support import channel, event, render

HOOK_SECRET = "https://hooks.slack.com/services/T0001/B0002/SuperSecretHookXYZ"


def webhook(tmp_path: Path, http: FakeHTTP | str, extra: str = ""):
    url = http if isinstance(http, str) else http.url
    text = f"""
    [[notify]]
    name = "slack"
    type = "slack"
    webhook_url_env = "SLACK_HOOK"
    base_url = "{url}"
    timeout = "2s"
    max_retry_wait = "3s"
    {extra}
    """
    return channel(tmp_path, text, env={"SLACK_HOOK": HOOK_SECRET})


def bot(tmp_path: Path, http: FakeHTTP):
    text = f"""
    [[notify]]
    name = "slack-bot"
    type = "slack"
    token_env = "SLACK_TOKEN"
    channel = "#train-alerts"
    base_url = "{http.url}/api/"
    timeout = "2s"
    """
    return channel(tmp_path, text, env={"SLACK_TOKEN": "xoxb-1111-2222-SecretBotToken"})


def test_webhook_posts_block_kit_with_a_text_fallback(tmp_path: Path, http: FakeHTTP) -> None:
    notifier = webhook(tmp_path, http)
    notifier.notify(render(notifier, event(summary="job 4242 <FAILED> & gone")))
    assert len(http.seen) == 1
    sent = http.seen[0]
    assert sent.path == "/services/T0001/B0002/SuperSecretHookXYZ"
    assert sent.headers["content-type"].startswith("application/json")
    body = sent.json()
    assert body["text"].startswith("[watchdogs cl1] CRITICAL: train-job")
    kinds = [b["type"] for b in body["blocks"]]
    assert kinds[0] == "header" and kinds[-1] == "context" and "section" in kinds
    section = body["blocks"][1]["text"]
    assert section["type"] == "mrkdwn"
    assert "job 4242 &lt;FAILED&gt; &amp; gone" in section["text"]
    assert "wd-test-key-0001" in body["blocks"][-1]["elements"][0]["text"]


def test_a_storm_fits_slack_limits(tmp_path: Path, http: FakeHTTP) -> None:
    notifier = webhook(tmp_path, http)
    events = [event(item=f"check-{i:03d}", summary="x" * 200) for i in range(500)]
    notifier.notify(render(notifier, *events))
    body = http.seen[0].json()
    assert len(body["blocks"]) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in body["blocks"] if b["type"] == "section")
    assert "470 more" in json.dumps(body["blocks"])


def test_webhook_invalid_payload_is_permanent(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(400, "invalid_payload")
    notifier = webhook(tmp_path, http)
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert caught.value.permanent and "invalid_payload" in caught.value.message


def test_webhook_server_error_is_transient(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(500, "internal error")
    notifier = webhook(tmp_path, http, "max_retries = 0")
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert not caught.value.permanent and "HTTP 500" in caught.value.message


def test_a_short_rate_limit_is_waited_out_by_slack_sdk(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(429, "rate_limited", Retry_After="1")
    notifier = webhook(tmp_path, http)
    notifier.notify(render(notifier))
    assert len(http.seen) == 2 and http.seen[0].body == http.seen[1].body


def test_a_long_rate_limit_goes_back_to_the_outbox_without_sleeping(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(429, "rate_limited", Retry_After="120")
    notifier = webhook(tmp_path, http)
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert time.monotonic() - started < 1.5
    assert not caught.value.permanent and caught.value.retry_after == 120
    assert len(http.seen) == 1


def test_bot_token_posts_chat_post_message_to_the_channel(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(200, {"ok": True, "channel": "C1", "ts": "1.2"})
    notifier = bot(tmp_path, http)
    notifier.notify(render(notifier))
    sent = http.seen[0]
    assert sent.path == "/api/chat.postMessage"
    assert sent.headers["authorization"] == "Bearer xoxb-1111-2222-SecretBotToken"
    body = sent.json()
    assert body["channel"] == "#train-alerts" and body["text"].startswith("[watchdogs cl1]")
    assert body["blocks"][0]["type"] == "header"
    assert body["metadata"]["event_payload"]["key"] == "wd-test-key-0001"


def test_bot_channel_not_found_is_permanent(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(200, {"ok": False, "error": "channel_not_found"})
    notifier = bot(tmp_path, http)
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert caught.value.permanent and "channel_not_found" in caught.value.message


def test_the_webhook_url_never_reaches_errors_or_logs(tmp_path: Path, http: FakeHTTP,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    http.reply(404, f"no_service for {HOOK_SECRET}")
    notifier = webhook(tmp_path, http)
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    down = webhook(tmp_path, f"http://127.0.0.1:{free_port()}", "max_retries = 1")  # refused
    with pytest.raises(TransportError) as refused:
        down.notify(render(down))
    seen = caught.value.message + refused.value.message + caplog.text + repr(notifier) + notifier.describe()
    assert "Failed to send a request" in caplog.text  # slack_sdk did log, through our filter
    assert "SuperSecretHookXYZ" not in seen and "T0001/B0002" not in seen
