"""`webhook`: a JSON POST to a URL, for other SMS gateways and paging services.

The body carries the message and every event as structured data; the outbox key travels
as the `Idempotency-Key` header and the body's `id`, so a receiver can drop a re-send.
A URL with a token in it can come from `url_env`/`url_file` instead of `url`.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from notifiers.base import Message, Notifier, TransportError
from notifiers.common import http_failure, secret_pair_problems, string_map
from notifiers.proxy import PROXY_OPTION, requests_proxies
from notifiers.secrets import guard_logger
from watchdogs import __version__
from watchdogs.config.options import Option, integer, path, string, timeout
from watchdogs.errors import SecretError

if TYPE_CHECKING:

    from notifiers.render import Templates
    from watchdogs.alerts.events import Batch


class WebhookNotifier(Notifier):
    type_name = "webhook"
    options: ClassVar[Mapping[str, Option]] = {
        "url": Option(string, default=None, help="endpoint (when it holds no secret)"),
        "url_env": Option(string, default=None, help="variable holding a secret endpoint URL"),
        "url_file": Option(path, default=None, help="file (0600) holding a secret endpoint URL"),
        "headers": Option(string_map, default={}, help="extra request headers (no secrets)"),
        "token_env": Option(string, default=None, help="variable holding a token for auth_header"),
        "token_file": Option(path, default=None, help="file (0600) holding a token for auth_header"),
        "auth_header": Option(string, default="Authorization"),
        "auth_scheme": Option(string, default="Bearer", help='"raw" sends the token alone'),
        "timeout": Option(timeout, default=10.0),
        "ca_file": Option(path, default=None),
        "proxy": PROXY_OPTION,
        "limit": Option(integer(1, 10000), default=50, help="events listed in the text"),
    }
    secret_keys = (("url_env", "url_file"), ("token_env", "token_file"))

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        problems = secret_pair_problems(values, "url_env", "url_file")
        problems += secret_pair_problems(values, "token_env", "token_file")
        given = [k for k in ("url", "url_env", "url_file") if values[k]]
        if len(given) != 1:
            problems.append(("url", values["url"], "exactly one of url, url_env, url_file"))
        if values["url"] and not values["url"].startswith(("http://", "https://")):
            problems.append(("url", values["url"], "an http:// or https:// URL"))
        return problems

    def describe(self) -> str:
        where = self.opts["url"] or (f"URL from ${self.opts['url_env']}" if self.opts["url_env"]
                                     else f"URL from {self.opts['url_file']}")
        return f"JSON POST to {where}"

    def endpoints(self) -> tuple[str, ...]:
        secret_url = self.secret("url_env", "url_file", "webhook URL")
        return (secret_url.reveal() if secret_url else self.opts["url"],)

    def render(self, batch: Batch, templates: Templates) -> Message:
        plain = templates.message(batch, self.type_name, limit=self.opts["limit"])
        extra = {"cluster": batch.cluster, "host": batch.host, "at": batch.at.isoformat(),
                 "alerts": [e.as_dict() for e in batch.events]}
        return Message(plain.subject, plain.text, None, plain.severity, plain.key, extra)

    def payload(self, message: Message) -> dict[str, Any]:
        return {"id": message.key, "source": "slurm-watchdogs", "severity": message.severity,
                "subject": message.subject, "text": message.text, **message.extra}

    def notify(self, message: Message) -> None:
        try:
            url, headers = self._target()
        except SecretError as exc:
            raise TransportError(str(exc), permanent=True) from None
        if message.key:
            headers["Idempotency-Key"] = message.key
        # urllib3 logs request paths at DEBUG, and a secret URL may hold its token there.
        guard_logger(logging.getLogger("urllib3.connectionpool"), self._secrets)
        ca = self.opts["ca_file"]
        import requests  # here, not at the top: `watchdogs status` builds this channel without sending

        try:
            reply = requests.post(url, json=self.payload(message), headers=headers,
                                  timeout=self.opts["timeout"], verify=str(ca) if ca else True,
                                  proxies=requests_proxies(self.opts["proxy"]))
        except requests.RequestException as exc:
            raise TransportError(self.scrub(f"webhook: {type(exc).__name__}: {exc}")) from None
        if not 200 <= reply.status_code < 300:
            raise http_failure("webhook", reply.status_code, self.scrub(reply.text), dict(reply.headers))

    def _target(self) -> tuple[str, dict[str, str]]:
        secret_url = self.secret("url_env", "url_file", "webhook URL")
        url = secret_url.reveal() if secret_url else self.opts["url"]
        headers = {"User-Agent": f"slurm-watchdogs/{__version__}", **self.opts["headers"]}
        token = self.secret("token_env", "token_file", "webhook token")
        if token is not None:
            scheme = self.opts["auth_scheme"]
            value = token.reveal() if scheme == "raw" else f"{scheme} {token.reveal()}"
            headers[self.opts["auth_header"]] = value
        return url, headers
