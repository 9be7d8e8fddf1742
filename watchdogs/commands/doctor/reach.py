"""`watchdogs doctor`'s network checks: can each channel's server (and the dead man's
switch) be reached from here, the way the channel will go: straight (DNS, then a TCP
connect), or through its HTTP proxy (a TCP connect to the proxy, then `CONNECT host:port`
for https, or a HEAD of the absolute URL for http, and the proxy's answer). With `--send`,
a real test message through every channel instead.

Nothing here sends an alert unless asked to; a reachability probe carries no secret (only
the host and port of a URL are used, never its path).
"""
from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from notifiers.base import Notifier, TransportError
from notifiers.proxy import proxy_for, shown
from watchdogs.commands.doctor.checks import Finding
from watchdogs.errors import SecretError, WatchdogsError
from watchdogs.result import Status

CONNECT_TIMEOUT_S = 5.0
PORTS = {"http": 80, "https": 443, "smtp": 25}
DOCS = "docs/compute-nodes.md"
# Channels that deliver on the host itself: no server, no way to it.
LOCAL = ("console", "logfile", "devmailbox")


@dataclass(frozen=True)
class Reach:
    """How one connection went: None as `problem` when it worked."""

    target: str
    via: str
    problem: str | None
    seconds: float


def _connect(host: str, port: int) -> socket.socket:
    """DNS then TCP, each failure said in words (the OSError's own text is often empty)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OSError(f"DNS cannot resolve {host}: {exc.strerror}") from None
    last: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(address)
            return sock
        except TimeoutError:
            last = OSError(f"no answer from {host}:{port} within {CONNECT_TIMEOUT_S:g}s "
                           "(a firewall drops it?)")
        except OSError as exc:
            last = OSError((exc.strerror or str(exc)).lower())
        sock.close()
    raise last or OSError(f"DNS has no address for {host}")


def _through_proxy(proxy: str, scheme: str, host: str, port: int) -> None:
    """Ask the proxy for the target; raise OSError with its answer if it will not."""
    parts = urlsplit(proxy)
    try:
        sock = _connect(parts.hostname or "", parts.port or 3128)
    except OSError as exc:
        raise OSError(f"the proxy {shown(proxy)} cannot be reached: {exc}") from None
    with sock:
        target = f"{host}:{port}"
        request = (f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n" if scheme == "https" else
                   f"HEAD http://{target}/ HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n")
        sock.sendall(request.encode())
        try:
            head = sock.recv(1024).decode("latin-1")
        except TimeoutError:
            raise OSError(f"the proxy {shown(proxy)} did not answer within {CONNECT_TIMEOUT_S:g}s") from None
    line = head.splitlines()[0] if head else "no answer"
    fields = line.split()
    code = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    # CONNECT: 2xx means the tunnel is open. HEAD: any answer but those proxies make up
    # themselves (500/502/503/504: could not reach the server, tinyproxy says 500;
    # 403/407: will not let us). A server's own 500 to `HEAD /` is read as unreachable too.
    refused = not 200 <= code < 300 if scheme == "https" else code in (0, 403, 407, 500, 502, 503, 504)
    if refused:
        raise OSError(f"the proxy {shown(proxy)} answered {line.strip()!r} for {target}")


def probe(url: str, configured_proxy: str | None) -> Reach:
    """Can `url`'s server be reached the way the channel goes there?"""
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    port = parts.port or PORTS.get(scheme, 443)
    proxy = proxy_for(url, configured_proxy) if scheme in ("http", "https") else None
    started = time.monotonic()
    try:
        if proxy:
            _through_proxy(proxy, scheme, host, port)
        else:
            _connect(host, port).close()
        problem = None
    except OSError as exc:
        problem = str(exc)
    return Reach(f"{host}:{port}", f"via proxy {shown(proxy)}" if proxy else "direct", problem,
                 time.monotonic() - started)


def _fix(reach: Reach, key: str, on_node: bool, smtp: bool = False) -> str:
    here = "compute nodes" if on_node else "this host"
    if smtp:
        return (f"{here} cannot reach the SMTP server {reach.target} (mail does not go through an "
                f"HTTP proxy): use a server reachable from here, or transport = \"sendmail\" with "
                f"the site's mail relay; see {DOCS}")
    if reach.via == "direct":
        return (f"{here} cannot reach {reach.target}: set https_proxy (and http_proxy) to the site's "
                f"proxy where the scheduler runs, or {key}; see {DOCS}")
    if "answered" in (reach.problem or ""):
        return (f"the proxy will not or cannot reach {reach.target}: ask the site to allow it, or use "
                f"another proxy (https_proxy or {key}); see {DOCS}")
    return f"the proxy itself cannot be reached: check https_proxy or {key} with the site; see {DOCS}"


def channel_reach(notifier: Notifier, on_node: bool) -> Finding:
    area = f"channel {notifier.name}"
    try:
        notifier.check_secrets()
        urls = notifier.endpoints()
    except (SecretError, WatchdogsError) as exc:
        return Finding(area, Status.CRITICAL, notifier.scrub(str(exc)),
                       "the secret must be readable where the scheduler runs (an exported "
                       "variable, or a 0600 file)")
    if notifier.opts.get("transport") == "sendmail":
        from notifiers.sendmail import program_problem

        problem = program_problem(notifier.opts["sendmail"])
        if problem:
            return Finding(area, Status.CRITICAL, f"{notifier.describe()}: {problem}",
                           f"install a sendmail program here, or set `sendmail` in "
                           f"[[notify]] \"{notifier.name}\"")
        return Finding(area, Status.OK, f"{notifier.describe()}: program present (--send tries a delivery)")
    problem = notifier.local_problem()
    if problem:
        return Finding(area, Status.CRITICAL, problem,
                       f"fix it where the scheduler runs, then `watchdogs notify-test {notifier.name}`")
    if not urls:
        local = notifier.type_name in LOCAL
        return Finding(area, Status.OK, f"{notifier.describe()}: " +
                       ("stays on this host" if local else "no address to probe (--send tries a delivery)"))
    reaches = [probe(url, notifier.proxy) for url in urls]
    bad = next((r for r in reaches if r.problem), None)
    facts = {"targets": [{"target": r.target, "via": r.via, "ok": r.problem is None,
                          "seconds": round(r.seconds, 3)} for r in reaches]}
    if bad is not None:
        key = f'`proxy` in [[notify]] "{notifier.name}"'
        said = notifier.scrub(str(bad.problem))
        return Finding(area, Status.CRITICAL, f"cannot reach {bad.target} ({bad.via}): {said}",
                       _fix(bad, key, on_node, smtp=notifier.type_name == "email"), facts)
    ways = ", ".join(f"{r.target} {r.via}" for r in reaches)
    return Finding(area, Status.OK, f"reaches {ways}", facts=facts)


def heartbeat_reach(url: str, proxy: str | None, on_node: bool) -> Finding:
    reach = probe(url, proxy)
    facts = {"target": reach.target, "via": reach.via}
    if reach.problem:
        return Finding("heartbeat", Status.CRITICAL,
                       f"cannot reach {reach.target} ({reach.via}): {reach.problem}",
                       _fix(reach, "`heartbeat_proxy` in [scheduler]", on_node), facts)
    return Finding("heartbeat", Status.OK, f"reaches {reach.target} {reach.via}", facts=facts)


def heartbeat_missing() -> Finding:
    """No `heartbeat_url`: the watchdog can report every failure but its own death (a scancel
    of the chain, a node lost, a full cluster keeping the successor pending). Only a service
    outside the cluster that expects its pings can."""
    return Finding("heartbeat", Status.WARNING,
                   "no dead man's switch (`heartbeat_url`): nothing can report the watchdog's own death "
                   "(its job cancelled, its node lost, its successor pending on a full cluster)",
                   "create a check with period 5 minutes and grace 10 minutes (free: healthchecks.io; "
                   "self-hosted: healthchecks or an Uptime Kuma push monitor) and set [scheduler] "
                   'heartbeat_url = "https://hc-ping.com/<uuid>" (docs/doctor.md#the-dead-mans-switch)',
                   {"configured": False})


def channel_send(notifier: Notifier, send: Callable[[Notifier], None]) -> Finding:
    """A real test message; `send` renders and delivers it (notify-test's batch)."""
    area = f"channel {notifier.name}"
    started = time.monotonic()
    try:
        notifier.check_secrets()
        send(notifier)
    except (TransportError, SecretError) as exc:
        permanent = getattr(exc, "permanent", True)
        text = notifier.scrub(getattr(exc, "message", str(exc)))
        fix = ("fix the address, secret or setting named" if permanent else
               "fix the file or folder named, where the scheduler runs" if notifier.type_name in LOCAL else
               f"the server or the way to it is down; if it stays so from here, see {DOCS}")
        return Finding(area, Status.CRITICAL, f"test message NOT delivered: {text}", fix,
                       {"delivered": False, "permanent": permanent})
    seconds = time.monotonic() - started
    return Finding(area, Status.OK, f"test message delivered in {seconds:.2f}s: {notifier.describe()}",
                   facts={"delivered": True, "seconds": round(seconds, 3)})
