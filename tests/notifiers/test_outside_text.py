"""Outside text in every channel's payload, asserted on the bytes the real client sent: a
byte that was not UTF-8 (a lone surrogate from a file name or JSON) never fails a send and
is shown as `\\xNN`, control characters are shown as escapes, and Slack's mrkdwn fields
(the top-level text as much as the blocks) never obey `<!channel>` or make a link."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from notifiers.base import Message
from tests.notifiers.fakes import FakeHTTP, SmtpServer
from tests.notifiers.support import channel, event, render
from tests.notifiers.test_slack import bot, webhook
from tests.notifiers.test_sms_webhook import TWILIO_OK, sms

NASTY = {"item": "cron.hourly/caf\udce9", "summary": "job caf\udce9\udcff <!channel> "
         "<https://evil.example/login|log in> & \x1b[2J\rCRITICAL forged\nline \u202e",
         "context": {"job": "n\udce9me <!here>"}, "details": ("detail \udcc0\udcaf \x1b]0;t\x07",)}


def assert_clean(text: str) -> None:
    """No raw control character, no lone surrogate, and the bytes shown as \\xNN."""
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in text), text
    assert not any(c in "\x1b\r\x07\u202e" for c in text), text
    assert "caf\\xe9" in text, text


def mrkdwn_fields(body: dict) -> list[str]:
    """Every field of a Slack payload that Slack parses as mrkdwn."""
    fields = [body["text"]]
    for block in body.get("blocks", []):
        if block["type"] == "section":
            fields.append(block["text"]["text"])
        elif block["type"] == "context":
            fields += [e["text"] for e in block["elements"] if e["type"] == "mrkdwn"]
    for attachment in body.get("attachments", []):
        fields += [attachment.get(k, "") for k in ("text", "fallback", "pretext")]
    return fields


@pytest.mark.parametrize("way", ["webhook", "bot"])
def test_slack_escapes_every_mrkdwn_field_it_sends_the_top_level_text_included(
        tmp_path: Path, http: FakeHTTP, way: str) -> None:
    if way == "bot":
        http.default.body = {"ok": True, "channel": "C1", "ts": "1.1"}
    notifier = (webhook if way == "webhook" else bot)(tmp_path, http)
    notifier.notify(render(notifier, event(**NASTY)))
    sent = http.seen[0]
    assert b"\\ud" not in sent.body  # no JSON-escaped lone surrogate went out
    body = json.loads(sent.body) if way == "webhook" else _api_form(sent.body)
    fields = mrkdwn_fields(body)
    assert len(fields) >= 3
    for text in fields:
        assert "<!" not in text and "<http" not in text and "|log in>" not in text, text
    assert "&lt;!channel&gt;" in body["text"] and "&amp;" in body["text"]
    assert "&lt;!channel&gt;" in fields[1]
    assert_clean(body["text"])
    assert "\n" + "CRITICAL forged" not in body["text"]


def _api_form(raw: bytes) -> dict:
    """chat.postMessage's body as slack_sdk sends it (JSON, or a form with JSON-encoded blocks)."""
    try:
        return dict(json.loads(raw))
    except ValueError:
        form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        form["blocks"] = json.loads(form.get("blocks", "[]"))
        return form


def test_email_subject_and_body_show_the_bytes_and_obey_no_escape(tmp_path: Path, smtp: SmtpServer) -> None:
    notifier = channel(tmp_path, f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\n'
                                 f'port = {smtp.port}\nsender = "wd@example.org"\nto = ["o@example.org"]\n')
    notifier.notify(render(notifier, event(**NASTY)))
    message = smtp.received[0].message
    subject = str(message["Subject"])
    assert_clean(subject)
    assert "\n" not in subject
    plain = message.get_body(("plain",))
    assert plain is not None
    text = plain.get_content().replace("\r\n", "\n")
    assert_clean(text)
    assert not any(line.startswith("CRITICAL forged") for line in text.splitlines())


def test_sms_and_webhook_bodies_show_the_bytes(tmp_path: Path, http: FakeHTTP) -> None:
    http.reply(201, TWILIO_OK)
    pager = sms(tmp_path, http)
    pager.notify(render(pager, event(**NASTY)))
    body = parse_qs(http.seen[0].body.decode())["Body"][0]
    assert_clean(body)
    hook = channel(tmp_path, f'[[notify]]\nname = "hook"\ntype = "webhook"\nurl = "{http.url}/h"\n')
    hook.notify(render(hook, event(**NASTY)))
    raw = http.seen[1].body
    assert b"\\ud" not in raw
    payload = json.loads(raw)
    alert = payload["alerts"][0]
    for text in (payload["subject"], payload["text"], alert["item"], alert["summary"]):
        assert_clean(text)
    assert "\\x1b]0;t\\x07" in alert["details"][0] and alert["context"]["job"] == "n\\xe9me <!here>"


def test_a_message_a_template_filled_with_a_surrogate_is_written_not_lost(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The last line of defence: a Message made by any template, the logfile's utf-8 write
    and the console's print take it."""
    log = tmp_path / "alerts.log"
    logfile = channel(tmp_path, f'[[notify]]\nname = "log"\ntype = "logfile"\npath = "{log}"\n')
    console = channel(tmp_path, '[[notify]]\nname = "out"\ntype = "console"\n')
    message = Message("caf\udce9 \x1b[2J\nforged", "caf\udce9 body\r\x1b[31m\nsecond line\n")
    for notifier in (logfile, console):
        notifier.notify(message)
    for text in (log.read_text(), capsys.readouterr().out):
        assert_clean(text)
        assert "second line" in text
