"""The configured channels as Notifier objects, from the `watchdogs.notifiers` entry points."""
from __future__ import annotations

import logging
from collections.abc import Mapping

from notifiers.base import Message, Notifier, TransportError, known_values
from watchdogs.config.model import Config, NotifyConfig
from watchdogs.errors import SecretError, WatchdogsError
from watchdogs.plugins import NOTIFIERS_GROUP, Registry, load_group
from watchdogs.textsafe import hide_in_logs

LOG = logging.getLogger("watchdogs.alerts")


def build_notifier(config: NotifyConfig, registry: Registry | None = None,
                   env: Mapping[str, str] | None = None) -> Notifier:
    registry = registry or load_group(NOTIFIERS_GROUP)
    cls = registry.classes.get(config.type)
    if cls is None:
        raise WatchdogsError(f'channel "{config.name}": no channel type "{config.type}" in {registry.group}')
    if not issubclass(cls, Notifier):
        raise WatchdogsError(f'channel "{config.name}": type "{config.type}" is not a Notifier class')
    return cls(config, env=env)


def build_channels(config: Config, registry: Registry | None = None,
                   env: Mapping[str, str] | None = None) -> dict[str, Notifier]:
    """Every enabled [[notify]] channel, by name."""
    registry = registry or load_group(NOTIFIERS_GROUP)
    return {n.name: build_notifier(n, registry, env) for n in config.notifiers if n.enabled}


def preflight(channels: Mapping[str, Notifier]) -> dict[str, str]:
    """Secret problems by channel, logged now rather than at the first alert."""
    problems = {}
    for name, channel in channels.items():
        try:
            channel.check_secrets()
        except SecretError as exc:
            problems[name] = str(exc)
            LOG.error("%s (alerts for this channel will wait in the outbox)", exc)
    hide_in_logs(known_values(channels.values()))
    return problems


def build_working_channels(config: Config, disabled: Mapping[str, list[str]] | None = None,
                           registry: Registry | None = None, env: Mapping[str, str] | None = None
                           ) -> tuple[dict[str, Notifier], dict[str, list[str]]]:
    """Every enabled channel that can be built and whose secrets can be read now; the
    others by name with the reasons (plus `disabled`, those the config loader set aside).
    One bad channel must not cost the others."""
    registry = registry or load_group(NOTIFIERS_GROUP)
    broken = {name: list(reasons) for name, reasons in (disabled or {}).items()}
    working = {}
    for cfg in config.notifiers:
        if not cfg.enabled:
            continue
        try:
            channel = build_notifier(cfg, registry, env)
            channel.check_secrets()
        except Exception as exc:  # noqa: BLE001 - a broken channel plugin must not stop the others
            reason = str(exc) if isinstance(exc, WatchdogsError) else f"{type(exc).__name__}: {exc}"
            broken.setdefault(cfg.name, []).append(reason)
            LOG.error("channel %s disabled: %s", cfg.name, reason)
            continue
        working[cfg.name] = channel
    hide_in_logs(known_values(working.values()))
    return working, broken


def deliver(notifier: Notifier, message: Message) -> TransportError | None:
    """The one side effect of delivery: hand the message to the channel. Every failure
    comes back as a TransportError with secrets scrubbed, never raised."""
    try:
        notifier.notify(message)
    except TransportError as exc:
        exc.message = notifier.scrub(exc.message)
        return exc
    except (ValueError, TypeError, UnicodeError) as exc:
        # The message or the channel's settings cannot be sent as they are (a CR in an
        # address, a header value a library refuses): the same bytes fail the same way on
        # every retry. Permanent: the channel is reported broken once, not retried every 30 s.
        return TransportError(notifier.scrub(f"cannot be sent as configured: {type(exc).__name__}: {exc}"),
                              permanent=True)
    except Exception as exc:  # noqa: BLE001 - a broken channel plugin must not stop the others
        return TransportError(notifier.scrub(f"{type(exc).__name__}: {exc}"))
    return None
