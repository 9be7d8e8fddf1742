"""`apprise`: one channel for the ~100 services Apprise speaks to (Microsoft Teams, Telegram,
Discord, Matrix, ntfy, Pushover, Mattermost, ...), given as Apprise URLs.

Most Apprise URLs hold a token (`tgram://bottoken/chat`, `discord://id/token`), so they
come from `urls_env` (a variable holding one or more URLs, separated by spaces, commas or
new lines) or `urls_file` (a 0600 file, one URL per line, `#` comments); `urls` is for URLs
with no secret in them (a public ntfy topic). Each URL is one recipient: a round that
reached some services and not others is retried only for the rest (`done`).

Apprise says "failed" with no status code; its per-service log line does ("... error=503.").
429/408/5xx, a connection error or a time-out are transient (the outbox retries); another
4xx is permanent (bad token, unknown chat); so is a URL Apprise cannot read.
Apprise is an optional dependency (`pip install 'slurm-watchdogs[apprise]'`), imported when
a channel of this type is built.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from notifiers.base import Message, Notifier, TransportError
from notifiers.common import RETRYABLE_HTTP, secret_pair_problems
from notifiers.secrets import Secret, guard_logger
from watchdogs.config.model import NotifyConfig
from watchdogs.config.options import Option, path, string, string_list, timeout
from watchdogs.errors import SecretError, WatchdogsError

_STATUS = re.compile(r"\berror[=:]\s*(\d{3})\b")
_SPLIT = re.compile(r"[\s,]+")
# Our severities -> Apprise's notification types (they pick the icon/colour per service).
_TYPES = {"critical": "failure", "unknown": "warning", "warning": "warning", "resolved": "success",
          "ok": "success"}
MISSING = "the apprise package installed (pip install 'slurm-watchdogs[apprise]')"


def _import_apprise() -> Any:
    try:
        import apprise
    except ImportError:
        return None
    return apprise


def split_urls(text: str) -> list[str]:
    """URLs from an environment variable or a file: separated by blanks, commas or lines;
    `#` starts a comment line."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [url for url in _SPLIT.split("\n".join(lines)) if url]


def classify(url_label: str, service: str, log_lines: list[str], timed_out: bool) -> TransportError:
    """A failed delivery as a TransportError: permanent only for a 4xx other than 408/425/429."""
    text = " ".join(log_lines)[-300:] or "no reason given"
    statuses = [int(s) for s in _STATUS.findall(text)]
    if timed_out:
        return TransportError(f"apprise {url_label} ({service}): timed out: {text}")
    if statuses:
        status = statuses[-1]
        permanent = 400 <= status < 500 and status not in RETRYABLE_HTTP
        return TransportError(f"apprise {url_label} ({service}): HTTP {status}: {text}", permanent=permanent)
    return TransportError(f"apprise {url_label} ({service}): {text}")


class AppriseNotifier(Notifier):
    type_name = "apprise"
    options: ClassVar[Mapping[str, Option]] = {
        "urls": Option(string_list, default=None, help="Apprise URLs holding no secret"),
        "urls_env": Option(string, default=None, help="variable holding secret Apprise URL(s)"),
        "urls_file": Option(path, default=None, help="file (0600) holding Apprise URLs, one a line"),
        "timeout": Option(timeout, default=10.0, help="bound on one delivery round"),
        "proxy": Option(string, default=None, help="not supported: Apprise takes its proxy from "
                                                   "https_proxy/http_proxy in the environment"),
    }
    secret_keys = (("urls_env", "urls_file"),)

    def __init__(self, config: NotifyConfig, env: Mapping[str, str] | None = None) -> None:
        super().__init__(config, env)
        self._apprise = _import_apprise()
        if self._apprise is None:
            raise WatchdogsError(f'channel "{config.name}": type apprise needs {MISSING}')

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        problems = secret_pair_problems(values, "urls_env", "urls_file")
        if values["proxy"]:
            # Apprise's plugins call requests themselves, with no proxy setting of their own;
            # requests reads the environment, so that is where an Apprise proxy goes.
            problems.append(("proxy", values["proxy"], "no proxy key: Apprise has no per-service proxy "
                                                       "setting; set https_proxy/http_proxy (and no_proxy) "
                                                       "in the scheduler's environment instead"))
        if not (values["urls"] or values["urls_env"] or values["urls_file"]):
            problems.append(("urls", None, "urls, urls_env or urls_file (URLs with tokens: "
                                           "never in the config)"))
        apprise = _import_apprise()
        if apprise is None:
            return [*problems, ("type", "apprise", MISSING)]
        for url in values["urls"] or ():
            if apprise.Apprise.instantiate(url) is None:
                problems.append(("urls", url, "an Apprise URL of a known service (see the Apprise wiki)"))
        return problems

    def describe(self) -> str:
        where = [f"{len(self.opts['urls'])} URL(s) in the config"] if self.opts["urls"] else []
        if self.opts["urls_env"]:
            where.append(f"URLs from ${self.opts['urls_env']}")
        if self.opts["urls_file"]:
            where.append(f"URLs from {self.opts['urls_file']}")
        return "Apprise: " + ", ".join(where)

    def targets(self) -> list[tuple[str, str]]:
        """(label, URL) per recipient; labels name no secret ("urls[1]", "urls_env[2]")."""
        found = [(f"urls[{i}]", url) for i, url in enumerate(self.opts["urls"] or (), 1)]
        secret = self.secret("urls_env", "urls_file", "Apprise URLs")
        if secret is not None:
            source = "urls_env" if self.opts["urls_env"] else "urls_file"
            for i, url in enumerate(split_urls(secret.reveal()), 1):
                found.append((f"{source}[{i}]", url))
                if Secret(url, secret.source) not in self._secrets:
                    self._secrets.append(Secret(url, secret.source))   # scrubbed one by one
        return found

    def notify(self, message: Message) -> None:
        try:
            targets = self.targets()
        except SecretError as exc:
            raise TransportError(str(exc), permanent=True) from None
        # Apprise logs the services' replies, and a URL's token may appear in them.
        guard_logger(logging.getLogger("apprise"), self._secrets)
        done, failures = list(message.done), []
        for label, url in targets:
            if label in done:
                continue
            error = self._send(label, url, message)
            if error is None:
                done.append(label)
            else:
                failures.append(error)
        if failures:
            permanent = all(f.permanent for f in failures)
            text = "; ".join(f.message for f in failures)
            raise TransportError(self.scrub(text), permanent=permanent, done=tuple(done))

    def _send(self, label: str, url: str, message: Message) -> TransportError | None:
        apprise = self._apprise
        service = apprise.Apprise.instantiate(url)
        if service is None:
            return TransportError(f"apprise {label}: not an Apprise URL of a known service", permanent=True)
        box = apprise.Apprise()
        box.add(service)
        result = box.notify(body=message.text.strip(), title=message.subject, timeout=self.opts["timeout"],
                            notify_type=_TYPES.get(message.severity, "info"))
        if result:
            return None
        lines = [entry.message for entry in result.logs()]
        timed_out = result.status == apprise.AppriseResultStatus.TIMEOUT
        return classify(label, service.service_name, lines, timed_out)
