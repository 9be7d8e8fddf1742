"""SMS through a Twilio-compatible endpoint, and the generic JSON webhook."""
from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from notifiers.base import TransportError
from tests.notifiers.fakes import FakeHTTP
from tests.notifiers.support import channel, event, render

SID = "AC0123456789abcdef0123456789abcdef"
TWILIO_OK = {"sid": "SM1", "status": "queued", "body": "..."}


def sms(tmp_path: Path, http: FakeHTTP, to: str = '["+15550001111"]', extra: str = ""):
    text = f"""
    [[notify]]
    name = "pager"
    type = "sms"
    account_sid = "{SID}"
    auth_token_env = "TWILIO_TOKEN"
    from_number = "+15559990000"
    to = {to}
    base_url = "{http.url}"
    timeout = "2s"
    {extra}
    """
    return channel(tmp_path, text, env={"TWILIO_TOKEN": "tw-secret-token-42"})


def test_sms_posts_a_form_with_basic_auth_to_the_messages_resource(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(201, TWILIO_OK)
    notifier = sms(tmp_path, http, extra="max_length = 120")
    many = [event(item=f"check-{i}", summary="scratch quota 97% of 400TiB used") for i in range(9)]
    notifier.notify(render(notifier, *many))
    sent = http.seen[0]
    assert sent.path == f"/2010-04-01/Accounts/{SID}/Messages.json"
    assert sent.headers["content-type"] == "application/x-www-form-urlencoded"
    assert sent.headers["authorization"] == "Basic " + base64.b64encode(
        f"{SID}:tw-secret-token-42".encode()).decode()
    form = {k: v[0] for k, v in parse_qs(sent.body.decode()).items()}
    assert form["To"] == "+15550001111" and form["From"] == "+15559990000"
    assert len(form["Body"]) <= 120 and form["Body"].endswith("...")
    assert form["Body"].startswith("cl1: 9 problems (9 CRITICAL)")


def test_a_single_alert_sms_leads_with_status_and_item(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(201, TWILIO_OK)
    notifier = sms(tmp_path, http)
    notifier.notify(render(notifier, event()))
    body = parse_qs(http.seen[0].body.decode())["Body"][0]
    assert body.startswith("CRITICAL train-job@cl1: job 4242 FAILED")


def test_twilio_validation_error_is_permanent_and_names_the_code(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(400, {"code": 21211, "message": "The 'To' number +15550001111 is not a valid phone number.",
                     "more_info": "https://www.twilio.com/docs/errors/21211", "status": 400})
    notifier = sms(tmp_path, http)
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert caught.value.permanent and "error 21211" in caught.value.message


def test_a_partly_failed_sms_round_is_retried_only_for_the_rest(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(201, TWILIO_OK)
    http.reply(503, {"code": 20500, "message": "Service unavailable"})
    notifier = sms(tmp_path, http, to='["+15550001111", "+15550002222"]')
    message = render(notifier)
    with pytest.raises(TransportError) as caught:
        notifier.notify(message)
    assert not caught.value.permanent and caught.value.done == ("+15550001111",)
    http.reply(201, TWILIO_OK)
    notifier.notify(type(message)(**{**message.__dict__, "done": caught.value.done}))
    recipients = [parse_qs(s.body.decode())["To"][0] for s in http.seen]
    assert recipients == ["+15550001111", "+15550002222", "+15550002222"]


def webhook(tmp_path: Path, http: FakeHTTP):
    text = f"""
    [[notify]]
    name = "pagerduty-ish"
    type = "webhook"
    url = "{http.url}/hooks/alerts"
    headers = {{ "X-Team" = "ml" }}
    token_env = "HOOK_TOKEN"
    timeout = "2s"
    """
    return channel(tmp_path, text, env={"HOOK_TOKEN": "hook-token-77"})


def test_webhook_posts_json_with_every_event_and_the_idempotency_key(tmp_path: Path, http: FakeHTTP) -> None:
    notifier = webhook(tmp_path, http)
    notifier.notify(render(notifier, event(), event(item="scratch", status="WARNING", summary="91% full")))
    sent = http.seen[0]
    assert sent.path == "/hooks/alerts"
    assert sent.headers["idempotency-key"] == "wd-test-key-0001"
    assert sent.headers["authorization"] == "Bearer hook-token-77" and sent.headers["x-team"] == "ml"
    body = sent.json()
    assert body["id"] == "wd-test-key-0001" and body["severity"] == "critical"
    assert [(a["item"], a["status"], a["state"]) for a in body["alerts"]] == [
        ("train-job", "CRITICAL", "alert"), ("scratch", "WARNING", "alert")]
    assert body["alerts"][0]["context"] == {"job": "4242", "partition": "debug"}
    assert body["alerts"][0]["since"] == "2024-05-01T11:53:00+00:00"


@pytest.mark.parametrize(("status", "permanent"), [(503, False), (429, False), (404, True), (401, True)])
def test_webhook_errors_are_classified_for_retry(tmp_path: Path, http: FakeHTTP, status: int,
                                                 permanent: bool) -> None:
    http.reply(status, "nope")
    notifier = webhook(tmp_path, http)
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert caught.value.permanent is permanent and f"HTTP {status}" in caught.value.message
