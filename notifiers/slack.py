"""`slack`: slack_sdk, by incoming webhook (`WebhookClient`) or bot token
(`WebClient.chat_postMessage` to a channel). Block Kit layout with a plain-text fallback.

slack_sdk's own retry handlers retry connection errors and 429s inside one delivery, but
bounded: a Retry-After longer than `max_retry_wait` is not slept through in the tick; the
outbox retries later instead. The webhook URL is a secret (anyone holding it can post), so
slack_sdk gets a private, scrubbed logger: it logs full URLs.
"""
from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from notifiers.base import Message, Notifier, TransportError
from notifiers.common import http_failure, secret_pair_problems
from notifiers.proxy import PROXY_OPTION, proxy_for
from notifiers.secrets import Secret, private_logger
from watchdogs.config.options import Option, duration, integer, path, string, timeout
from watchdogs.config.paths import FILE_TRUSTED
from watchdogs.errors import SecretError

if TYPE_CHECKING:
    from slack_sdk.errors import SlackApiError
    from slack_sdk.http_retry import RetryHandler

    from notifiers.render import Templates
    from watchdogs.alerts.events import Batch

MAX_SECTION = 3000
MAX_SECTIONS = 45
_TRANSIENT_API_ERRORS = frozenset({"ratelimited", "internal_error", "fatal_error", "service_unavailable",
                                   "request_timeout"})


def blocks_for(subject: str, mrkdwn_text: str, footer: str) -> list[dict[str, Any]]:
    """Header, the text cut at line ends into sections of at most 3000 characters, footer."""
    sections: list[str] = []
    current = ""
    for line in mrkdwn_text.splitlines():
        line = line[:MAX_SECTION]
        if current and len(current) + len(line) + 1 > MAX_SECTION:
            sections.append(current)
            current = ""
        current = f"{current}\n{line}" if current else line
    if current.strip():
        sections.append(current)
    if len(sections) > MAX_SECTIONS:
        sections = sections[:MAX_SECTIONS - 1] + ["_... cut: Slack allows only so many blocks; "
                                                  "run `watchdogs alerts` for the rest_"]
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": subject[:150]}}]
    blocks += [{"type": "section", "text": {"type": "mrkdwn", "text": s}} for s in sections]
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": footer}]})
    return blocks


class SlackNotifier(Notifier):
    type_name = "slack"
    options: ClassVar[Mapping[str, Option]] = {
        "webhook_url_env": Option(string, default=None, help="variable holding the incoming-webhook URL"),
        "webhook_url_file": Option(path, default=None, help="file (0600) holding the webhook URL"),
        "token_env": Option(string, default=None, help="variable holding a bot token (xoxb-...)"),
        "token_file": Option(path, default=None, help="file (0600) holding a bot token"),
        "channel": Option(string, default=None, help="channel for the bot token, e.g. #train-alerts"),
        "base_url": Option(string, default=None, help="API root (token) or host (webhook) to use instead"),
        "timeout": Option(timeout, default=10.0),
        "max_retries": Option(integer(0, 5), default=2, help="in-call retries on 429/connection errors"),
        "max_retry_wait": Option(duration, default=10.0, help="longer Retry-After waits go to the outbox"),
        "ca_file": Option(path, default=None, exists=FILE_TRUSTED),
        "proxy": PROXY_OPTION,
        "limit": Option(integer(1, 200), default=30, help="events listed in one message"),
    }
    secret_keys = (("webhook_url_env", "webhook_url_file"), ("token_env", "token_file"))

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        problems = secret_pair_problems(values, "webhook_url_env", "webhook_url_file")
        problems += secret_pair_problems(values, "token_env", "token_file")
        hook = values["webhook_url_env"] or values["webhook_url_file"]
        token = values["token_env"] or values["token_file"]
        if bool(hook) == bool(token):
            problems.append(("webhook_url_env", values["webhook_url_env"],
                             "one way in: webhook_url_env/_file (incoming webhook) or "
                             "token_env/_file with channel (bot token)"))
        if token and not values["channel"]:
            problems.append(("channel", None, "the channel to post to with the bot token"))
        if hook and values["channel"]:
            problems.append(("channel", values["channel"], "no channel: a webhook posts to its own"))
        return problems

    @property
    def uses_token(self) -> bool:
        return bool(self.opts["token_env"] or self.opts["token_file"])

    def describe(self) -> str:
        if self.uses_token:
            return f"Slack {self.opts['channel']} via {self._api_url()} (bot token from {self._source()})"
        via = f" via {self.opts['base_url']}" if self.opts["base_url"] else ""
        return f"Slack incoming webhook{via} (URL from {self._source()})"

    def _source(self) -> str:
        for key in ("token_env", "webhook_url_env"):
            if self.opts[key]:
                return f"${self.opts[key]}"
        return str(self.opts["token_file"] or self.opts["webhook_url_file"])

    def send_budget(self) -> float:
        retries = self.opts["max_retries"]
        return (retries + 1) * self.opts["timeout"] + retries * (self.opts["max_retry_wait"] + 1) + 5

    def render(self, batch: Batch, templates: Templates) -> Message:
        from notifiers.render import mrkdwn  # with the templates (jinja2), not when `status` builds channels

        plain = templates.message(batch, self.type_name, limit=self.opts["limit"])
        # Every mrkdwn field is escaped for Slack (&, <, >): a job name "<!channel>" or
        # "<https://evil|login>" in the subject must not ping a channel or make a link in the
        # top-level text (the notification and fallback) any more than in the blocks. The
        # header block is plain_text, which Slack shows as it is.
        footer = (f"watchdogs on {mrkdwn(batch.host)} · cluster {mrkdwn(batch.cluster)} · "
                  f"id {mrkdwn(batch.key)}")
        blocks = blocks_for(plain.subject, plain.text, footer)
        fallback = f"{mrkdwn(plain.subject)}\n{plain.text}"[:MAX_SECTION]
        return Message(plain.subject, fallback, None, plain.severity, plain.key, {"blocks": blocks})

    def notify(self, message: Message) -> None:
        # slack_sdk is imported here, when an alert goes out, not when the channel is built
        # (`watchdogs status` builds every channel to show the disabled ones).
        from notifiers.slack_client import SlackApiError, SlackClientError

        try:
            if self.uses_token:
                self._post_api(message, self.secret("token_env", "token_file", "Slack token"))
            else:
                self._post_webhook(message, self.secret("webhook_url_env", "webhook_url_file",
                                                        "Slack webhook URL"))
        except SecretError as exc:
            raise TransportError(str(exc), permanent=True) from None
        except SlackApiError as exc:
            raise self._api_failure(exc) from None
        except (SlackClientError, OSError, ValueError) as exc:
            raise TransportError(self.scrub(f"Slack: {type(exc).__name__}: {exc}")) from None

    def endpoints(self) -> tuple[str, ...]:
        if self.uses_token:
            return (self._api_url(),)
        return (self._webhook_url(self.secret("webhook_url_env", "webhook_url_file", "Slack webhook URL")),)

    def _client_args(self, url: str) -> dict[str, Any]:
        ca = self.opts["ca_file"]
        return {"timeout": max(1, round(self.opts["timeout"])),
                # slack_sdk would read $HTTPS_PROXY itself, also for an http:// base_url;
                # proxy_for picks by the URL's scheme, as requests does (urllib's
                # ProxyHandler then still skips hosts in no_proxy).
                "proxy": proxy_for(url, self.proxy),
                "ssl": ssl.create_default_context(cafile=str(ca)) if ca else None,
                "logger": private_logger(f"notifiers.slack.{self.name}", self._secrets),
                "retry_handlers": self._retry_handlers()}

    def _retry_handlers(self) -> list[RetryHandler]:
        from notifiers.slack_client import retry_handlers

        return retry_handlers(self.opts["max_retries"], self.opts["max_retry_wait"])

    def _webhook_url(self, secret: Secret | None) -> str:
        """The secret URL, or its path on `base_url` (an on-premise relay, or the tests)."""
        assert secret is not None  # validate_options guarantees one way in
        url = secret.reveal()
        base = self.opts["base_url"]
        if not base:
            return url
        parts = urlsplit(url)
        return base.rstrip("/") + parts.path + (f"?{parts.query}" if parts.query else "")

    def _post_webhook(self, message: Message, secret: Secret | None) -> None:
        from notifiers.slack_client import WebhookClient

        url = self._webhook_url(secret)
        client = WebhookClient(url, **self._client_args(url))
        response = client.send(text=message.text, blocks=message.extra.get("blocks"))
        if response.status_code != 200:
            raise http_failure("Slack webhook", response.status_code, self.scrub(str(response.body)),
                               dict(response.headers or {}))

    def _api_url(self) -> str:
        return self.opts["base_url"] or "https://slack.com/api/"

    def _post_api(self, message: Message, secret: Secret | None) -> None:
        from notifiers.slack_client import WebClient

        assert secret is not None  # validate_options guarantees one way in
        api = self._api_url()
        client = WebClient(token=secret.reveal(), base_url=api, **self._client_args(api))
        client.chat_postMessage(
            channel=self.opts["channel"], text=message.text, blocks=message.extra.get("blocks"),
            metadata={"event_type": "watchdogs_alert",
                      "event_payload": {"key": message.key, "severity": message.severity}})

    def _api_failure(self, exc: SlackApiError) -> TransportError:
        response = exc.response
        status = getattr(response, "status_code", 0)
        data = response.data if isinstance(getattr(response, "data", None), dict) else {}
        error = str(data.get("error") or f"HTTP {status}")
        if status == 429 or status >= 500 or error in _TRANSIENT_API_ERRORS:
            headers = dict(getattr(response, "headers", {}) or {})
            failure = http_failure("Slack chat.postMessage", status, error, headers)
            failure.permanent = False
            return failure
        return TransportError(self.scrub(f"Slack chat.postMessage: {error}"), permanent=True)
