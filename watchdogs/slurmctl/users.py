"""Whose jobs a check watches: user names, `@group` (every member of the Unix group, plus
every user whose primary group it is), or `*` (anyone)."""
from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Iterable

from watchdogs.errors import WatchdogsError

ANYONE = "*"


def current_user() -> str:
    """The user the watchdog runs as: the default owner of watched jobs."""
    return pwd.getpwuid(os.geteuid()).pw_name


def group_members(group: str) -> frozenset[str]:
    """Members listed in the group database and users whose primary gid is the group's."""
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        raise WatchdogsError(f"users: no such Unix group {group!r}") from None
    primary = {p.pw_name for p in pwd.getpwall() if p.pw_gid == entry.gr_gid}
    return frozenset(entry.gr_mem) | frozenset(primary)


def resolve_users(spec: Iterable[str] | None) -> frozenset[str] | None:
    """User names for a `users` option; None means anyone. Empty spec: the current user."""
    names = tuple(spec) if spec else (current_user(),)
    if ANYONE in names:
        return None
    users: set[str] = set()
    for name in names:
        users |= group_members(name[1:]) if name.startswith("@") else {name}
    if not users:
        raise WatchdogsError(f"users: {', '.join(names)} resolve to nobody")
    return frozenset(users)
