"""Which channels hear about an event: the item's own route by severity, else the
`[alerts] notify` default, else every enabled channel (an alert with nowhere to go is the
worst failure, so "no route configured" means "everyone", not "no one")."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

Route = Mapping[str, tuple[str, ...]]
# A notice (news, not a problem) nobody routed goes where warnings go.
_FALLBACK = {"unknown": ("warning", "critical"), "notice": ("warning", "critical"), "warning": (),
             "critical": ()}


def pick_route(own: Route | None, default: Route | None) -> Route | None:
    return own if own is not None else default


def _lookup(route: Route, severity: str) -> tuple[str, ...]:
    """A table naming only some severities: UNKNOWN (the check could not look) goes where
    WARNING goes, else where CRITICAL goes."""
    for key in (severity, *_FALLBACK.get(severity, ())):
        if key in route:
            return tuple(route[key])
    return ()


def channels_for(route: Route | None, severity: str, previous: str,
                 enabled: Sequence[str]) -> tuple[str, ...]:
    """Channels for an event of `severity` (warning/critical/unknown/resolved). A resolution
    goes to `resolved` if the route names it, else to where the alert it closes went."""
    if route is None:
        names: tuple[str, ...] = tuple(enabled)
    elif severity == "resolved" and "resolved" not in route:
        names = _lookup(route, previous)
    else:
        names = _lookup(route, severity)
    return tuple(n for n in dict.fromkeys(names) if n in enabled)
