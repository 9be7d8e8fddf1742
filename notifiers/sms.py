"""`sms`: Twilio's Messages REST API through `requests` (form-encoded To/From/Body, basic
auth with the account SID and auth token). One request per recipient; the text is cut to
`max_length` with the essential first (the template puts status, item and summary ahead).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from notifiers.base import Message, Notifier, TransportError
from notifiers.common import http_failure, secret_pair_problems
from notifiers.proxy import PROXY_OPTION, requests_proxies
from watchdogs.config.options import Option, integer, path, string, string_list, timeout
from watchdogs.errors import SecretError

if TYPE_CHECKING:
    import requests

    from notifiers.render import Templates
    from watchdogs.alerts.events import Batch

API_PATH = "/2010-04-01/Accounts/{sid}/Messages.json"


def cut(text: str, limit: int) -> str:
    """Blank lines out, then at most `limit` characters. ASCII "..." as the mark: one
    non-GSM character would halve the SMS length."""
    text = "\n".join(line.rstrip() for line in text.splitlines() if line.strip())
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


class SmsNotifier(Notifier):
    type_name = "sms"
    options: ClassVar[Mapping[str, Option]] = {
        "account_sid": Option(string, required=True, help="Twilio account SID (AC...)"),
        "auth_token_env": Option(string, default=None, help="variable holding the auth token"),
        "auth_token_file": Option(path, default=None, help="file (0600) holding the auth token"),
        "from_number": Option(string, required=True, help="sending number, E.164 (+15550001111)"),
        "to": Option(string_list, required=True, help="receiving numbers, E.164"),
        "base_url": Option(string, default="https://api.twilio.com"),
        "timeout": Option(timeout, default=10.0),
        "max_length": Option(integer(20, 1600), default=320, help="characters per message"),
        "ca_file": Option(path, default=None),
        "proxy": PROXY_OPTION,
    }
    secret_keys = (("auth_token_env", "auth_token_file"),)

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        problems = secret_pair_problems(values, "auth_token_env", "auth_token_file", required=True)
        numbers = [("from_number", values["from_number"])] + [("to", n) for n in values["to"]]
        problems += [(key, n, "a phone number in E.164 form, such as +15550001111")
                     for key, n in numbers if not (n.startswith("+") and n[1:].isdigit())]
        return problems

    def describe(self) -> str:
        return (f"SMS to {', '.join(self.opts['to'])} from {self.opts['from_number']} via "
                f"{self.opts['base_url']} (account {self.opts['account_sid']})")

    def endpoints(self) -> tuple[str, ...]:
        return (self.opts["base_url"],)

    def send_budget(self) -> float:
        return len(self.opts["to"]) * self.opts["timeout"] * 2 + 5

    def render(self, batch: Batch, templates: Templates) -> Message:
        plain = templates.message(batch, self.type_name, limit=5)
        text = cut(plain.text, self.opts["max_length"])
        return Message(plain.subject, text, None, plain.severity, plain.key)

    def notify(self, message: Message) -> None:
        try:
            token = self.secret("auth_token_env", "auth_token_file", "Twilio auth token")
        except SecretError as exc:
            raise TransportError(str(exc), permanent=True) from None
        assert token is not None  # validate_options requires one
        done, refused = list(message.done), []
        for number in self.opts["to"]:
            if number in done:
                continue
            try:
                self._send_one(number, message.text, token.reveal())
            except TransportError as exc:
                if not exc.permanent:
                    raise TransportError(exc.message, retry_after=exc.retry_after, done=tuple(done)) from None
                refused.append(exc.message)
                continue
            done.append(number)
        if refused:
            raise TransportError("; ".join(refused), permanent=True, done=tuple(done))

    def _send_one(self, number: str, body: str, token: str) -> None:
        url = self.opts["base_url"].rstrip("/") + API_PATH.format(sid=self.opts["account_sid"])
        ca = self.opts["ca_file"]
        import requests  # here, not at the top: `watchdogs status` builds this channel without sending

        try:
            reply = requests.post(url, data={"To": number, "From": self.opts["from_number"], "Body": body},
                                  auth=(self.opts["account_sid"], token), timeout=self.opts["timeout"],
                                  verify=str(ca) if ca else True,
                                  proxies=requests_proxies(self.opts["proxy"]))
        except requests.RequestException as exc:
            raise TransportError(self.scrub(f"Twilio, to {number}: {type(exc).__name__}: {exc}")) from None
        if reply.status_code in (200, 201):
            return
        raise http_failure(f"Twilio, to {number}", reply.status_code, self.scrub(_twilio_error(reply)),
                           dict(reply.headers))


def _twilio_error(reply: requests.Response) -> str:
    """Twilio's error body: {"code": 21211, "message": "...", "more_info": ..., "status": 400}."""
    try:
        data = reply.json()
    except ValueError:
        return reply.text
    if isinstance(data, dict) and "message" in data:
        return f"error {data.get('code')}: {data['message']}"
    return reply.text
