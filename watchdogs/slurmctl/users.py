"""Whose jobs a check watches: user names, `@group` (every member of the Unix group, plus
every user whose primary group it is), or `*` (anyone)."""
from __future__ import annotations

import grp
import os
import pwd
import re
from collections.abc import Iterable

from watchdogs.errors import WatchdogsError

ANYONE = "*"
# squeue's words for a name it cannot resolve: `squeue: error: Invalid user: nosuchuser`.
_INVALID_USER = re.compile(r"Invalid user:?\s*'?([^\s']+)")


def not_known(name: str) -> str:
    """The one wording of a `users` name that Slurm does not know."""
    return f"Slurm does not know user {name}"


# squeue resolves a name with this host's user database (getpwnam), as this module does, and
# answers one it lacks with `Invalid user` and an empty listing, exit 0: never "no job".
NOT_KNOWN_WHY = ("no such user on this host: a typo? squeue answers \"Invalid user\" and lists "
                 "nothing, which is not the same as no job")


class UnknownUser(WatchdogsError):
    """A `users` name that neither this host nor, so, squeue knows."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{not_known(name)} ({NOT_KNOWN_WHY})")
        self.name = name


def invalid_user_in(text: str) -> str | None:
    """The name in squeue's `Invalid user: NAME` (stderr, or an error quoting it); None."""
    match = _INVALID_USER.search(text)
    return match.group(1) if match else None


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
            problems.append(f"{not_known(name)} (no such user {name!r} on this host)")
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
                raise UnknownUser(name) from None
        users |= group_members(name[1:]) if name.startswith("@") else {name}
    if not users:
        raise WatchdogsError(f"users: {', '.join(names)} resolve to nobody")
    return frozenset(users)
