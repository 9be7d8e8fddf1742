"""`watchdogs notify-test CHANNEL`: send a test message through one channel, right now (not
through the outbox), and say exactly what happened: where it went, how long it took, or
the error and whether the scheduler would retry it."""
from __future__ import annotations

import argparse
import getpass
import socket
import time
import uuid
from datetime import datetime

from notifiers.base import TransportError
from notifiers.render import Templates
from watchdogs.alerts.channels import build_notifier, deliver
from watchdogs.alerts.events import AlertEvent, Batch
from watchdogs.commands.base import CommandResult, config_from_args
from watchdogs.errors import SecretError, WatchdogsError
from watchdogs.result import Status


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("notify-test", help="send a test message through one channel")
    parser.add_argument("channel", help="the name of a [[notify]] channel")
    parser.add_argument("--severity", choices=("warning", "critical"), default="warning")
    parser.set_defaults(handler=channel_test)


def notify_test_batch(channel: str, severity: str, cluster: str) -> Batch:
    """The test message: one event of kind "test" that says who sent it from where (also
    what `watchdogs doctor --send` sends)."""
    now = datetime.now().astimezone()
    host = socket.gethostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "someone"
    event = AlertEvent(item="notify-test", state="test", status=Status[severity.upper()], previous=Status.OK,
                       summary=f"test message from watchdogs on {host}: channel {channel} works",
                       since=now, at=now, kind="test",
                       note=f"sent by {user} with `watchdogs notify-test {channel}`")
    return Batch(channel, (event,), now, cluster, host, key=f"wd-test-{uuid.uuid4().hex[:16]}")


def channel_test(args: argparse.Namespace) -> CommandResult:
    config = config_from_args(args)
    settings = config.notifier(args.channel)
    if settings is None:
        names = ", ".join(n.name for n in config.notifiers) or "none defined"
        raise WatchdogsError(f"no [[notify]] channel named {args.channel!r} in {config.path} ({names})")
    notifier = build_notifier(settings)
    from watchdogs.slurmctl.clustername import cluster_name

    cluster = cluster_name(config.alerts.cluster, socket.gethostname())
    batch = notify_test_batch(settings.name, args.severity, cluster)
    message = notifier.render(batch, Templates(config.alerts.templates))
    head = f"channel {settings.name!r} ({settings.type})"
    data = {"channel": settings.name, "type": settings.type, "destination": notifier.describe(),
            "key": message.key, "enabled": settings.enabled}
    started = time.monotonic()
    try:
        notifier.check_secrets()
        failure = deliver(notifier, message)  # the scheduler's one way to send: same errors, same words
    except SecretError as exc:
        failure = TransportError(str(exc), permanent=True)
    if failure is not None:
        seconds = time.monotonic() - started
        permanent = failure.permanent
        text = notifier.scrub(failure.message)
        advice = ("permanent: fix the configuration, secret or address; the scheduler retries such "
                  "messages only hourly") if permanent else \
            "transient: the scheduler would keep it in the outbox and retry with backoff"
        data |= {"delivered": False, "seconds": round(seconds, 3), "error": text, "permanent": permanent}
        return CommandResult(f"{head}: NOT delivered after {seconds:.2f}s to {notifier.describe()}\n"
                             f"  error: {text}\n  {advice}", data, exit_code=1)
    seconds = time.monotonic() - started
    data |= {"delivered": True, "seconds": round(seconds, 3)}
    disabled = "" if settings.enabled else " (the channel is disabled in the config: alerts skip it)"
    return CommandResult(f"{head}: delivered in {seconds:.2f}s: {notifier.describe()} "
                         f"(message id {message.key}){disabled}", data)
