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


def unknown_names(spec: Iterable[str] | None) -> list[str]:
    """The problems of a `users` option: each user or @group the system does not know.
    squeue answers an unknown user with `Invalid user` on stderr and an empty listing, exit
    0: a typo would look like "no job is running"."""
    problems = []
    for name in spec or ():
        if name == ANYONE:
            continue
        if name.startswith("@"):
            try:
                grp.getgrnam(name[1:])
            except KeyError:
                problems.append(f"no such Unix group {name[1:]!r}")
            continue
        try:
            pwd.getpwnam(name)
        except KeyError:
            problems.append(f"no such user {name!r}")
    return problems


def resolve_users(spec: Iterable[str] | None) -> frozenset[str] | None:
    """User names for a `users` option; None means anyone. Empty spec: the current user.
    An unknown user or group raises: whose jobs are watched must be certain."""
    names = tuple(spec) if spec else (current_user(),)
    if ANYONE in names:
        return None
    users: set[str] = set()
    for name in names:
        if not name.startswith("@"):
            try:
                pwd.getpwnam(name)
            except KeyError:
                raise WatchdogsError(f"users: no such user {name!r} (a typo? squeue would list "
                                     "nobody's jobs, which is not the same as no job)") from None
        users |= group_members(name[1:]) if name.startswith("@") else {name}
    if not users:
        raise WatchdogsError(f"users: {', '.join(names)} resolve to nobody")
    return frozenset(users)
