"""The chain's dead man's switch: pings an outside service (healthchecks.io, Cronitor,
Uptime Kuma push monitors) while the scheduler runs, so a person is paged when the chain
dies, its successor cannot start, or the whole cluster is down. Nothing on the cluster can
report its own absence; only a missing ping can.

healthchecks.io's protocol (https://healthchecks.io/docs/http_api/): a GET or POST to the
ping URL means "alive"; `<url>/start` means "a run begins"; `<url>/fail` means "failed, page
now". A POST body (up to 100 kB) is kept by the service and shown in the alert; ours names
the instance, and on /fail the reason (secrets scrubbed).

A ping never blocks the tick: it runs on its own short-lived thread with a timeout, at most
one "alive" ping at a time (one still in flight when the next is due is skipped: it would
say the same; /start and /fail always go). A failed ping is logged, never fatal.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests

from notifiers.proxy import requests_proxies
from notifiers.secrets import Secret, scrub

LOG = logging.getLogger("watchdogs.deadman")
TIMEOUT_S = 10.0
BODY_LIMIT = 10_000
"""healthchecks.io keeps 100 kB; a page needs far less."""
SUCCESS, START, FAIL = "", "start", "fail"


@dataclass(frozen=True)
class Ping:
    url: str
    body: str
    signal: str


def ping_url(base: str, signal: str, suffixes: bool) -> str | None:
    """The URL for `signal` ("", "start", "fail"); None when plain pings are configured and
    the signal is not "alive" (a plain push monitor has no way to hear "start")."""
    if not signal:
        return base
    if not suffixes:
        return None
    head, sep, query = base.partition("?")
    return f"{head.rstrip('/')}/{signal}{sep}{query}"


def where(url: str) -> str:
    """The service's host, for logs: the path of a ping URL is its secret."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}/…"


class DeadMansSwitch:
    def __init__(self, url: str | None, *, suffixes: bool = True, timeout: float = TIMEOUT_S,
                 proxy: str | None = None,
                 secrets: Callable[[], Iterable[Secret]] = tuple,
                 post: Callable[..., requests.Response] = requests.post) -> None:
        self.url = url
        self.suffixes = suffixes
        self.timeout = timeout
        self.proxies = requests_proxies(proxy)
        self.secrets = secrets
        self._post = post
        self._busy = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.sent = 0
        self.failed = 0

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    def alive(self, body: str) -> bool:
        return self._send(SUCCESS, body)

    def start(self, body: str) -> bool:
        return self._send(START, body)

    def fail(self, body: str) -> bool:
        return self._send(FAIL, body)

    def wait(self, timeout: float | None = None) -> None:
        """At exit: let the /fail pings in flight finish (a /fail must leave before the
        process does), within `timeout` in all. Other pings are not waited for: a hung ping
        service must not hold up a handover."""
        deadline = time.monotonic() + (self.timeout + 1.0 if timeout is None else timeout)
        for thread in list(self._threads):
            if thread.name == f"deadman-{FAIL}":
                thread.join(max(0.0, deadline - time.monotonic()))

    def _send(self, signal: str, body: str) -> bool:
        """Start one ping in the background; False if none is configured or an "alive" ping
        is still in flight."""
        url = ping_url(self.url, signal, self.suffixes) if self.url else None
        if url is None:
            return False
        gated = signal == SUCCESS
        if gated and not self._busy.acquire(blocking=False):
            LOG.debug("dead man's switch: a ping is still in flight; this one is skipped")
            return False
        ping = Ping(url, scrub(body, list(self.secrets()))[:BODY_LIMIT], signal)
        thread = threading.Thread(target=self._deliver, args=(ping, gated), daemon=True,
                                  name=f"deadman-{signal or 'alive'}")
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return True

    def _deliver(self, ping: Ping, gated: bool) -> None:
        try:
            # proxies None (no heartbeat_proxy): requests reads https_proxy/no_proxy itself.
            reply = self._post(ping.url, data=ping.body.encode(), timeout=self.timeout, proxies=self.proxies,
                               headers={"Content-Type": "text/plain; charset=utf-8",
                                        "User-Agent": "slurm-watchdogs"})
            if reply.status_code >= 400:
                raise requests.HTTPError(f"HTTP {reply.status_code}")
            self.sent += 1
            LOG.debug("dead man's switch: pinged %s (%s)", where(ping.url), ping.signal or "alive")
        except requests.RequestException as exc:
            self.failed += 1
            # The exception text may carry the URL, whose path is the secret.
            text = str(exc).replace(ping.url, where(ping.url))
            LOG.warning("dead man's switch: ping %s to %s failed (not fatal; the service pages if this "
                        "goes on): %s", ping.signal or "alive", where(ping.url), text)
        finally:
            if gated:
                self._busy.release()
