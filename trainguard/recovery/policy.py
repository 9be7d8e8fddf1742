"""The recovery policy a run was judged by, kept in its record.

The job decides with its own `TRAINGUARD_SUSPECT_*` and `TRAINGUARD_STORM_*` settings; the
watchdog, which runs with another environment, must judge the same run by the same rules
(whether a node is excluded, whether a resubmit would be a storm). So every `suspect` and
`restart` entry carries the policy that was in force (`policy` field), and the readers use
the newest one; a record written before this existed is judged by trainguard's defaults,
and the reader is told so.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainguard.recovery.restarts import StormPolicy
from trainguard.recovery.suspects import SuspectPolicy

NO_POLICY = ("the record names no policy (written by an older trainguard): judged by "
             "trainguard's defaults")


@dataclass(frozen=True)
class Policies:
    suspect: SuspectPolicy
    storm: StormPolicy
    source: str                # "" when the record named it, else why the defaults apply


def to_fields(suspect: SuspectPolicy, storm: StormPolicy) -> dict[str, Any]:
    return {"suspect_window": suspect.window, "suspect_at_once": sorted(suspect.at_once),
            "suspect_limit": suspect.limit, "storm_restarts": storm.restarts,
            "storm_window": storm.window, "storm_no_progress": storm.no_progress}


def from_fields(f: Mapping[str, Any]) -> tuple[SuspectPolicy, StormPolicy]:
    """ValueError/KeyError/TypeError when it is not a whole policy."""
    return (SuspectPolicy(float(f["suspect_window"]), frozenset(map(str, f["suspect_at_once"])),
                          int(f["suspect_limit"])),
            StormPolicy(int(f["storm_restarts"]), float(f["storm_window"]), int(f["storm_no_progress"])))


def recorded(entries: Sequence[Mapping[str, Any]]) -> Policies:
    """The newest whole policy among the entries (oldest first), else the defaults."""
    bad = ""
    for e in reversed(entries):
        if "policy" not in e:
            continue
        try:
            suspect, storm = from_fields(e["policy"])
            return Policies(suspect, storm, "")
        except (KeyError, TypeError, ValueError) as exc:
            bad = bad or f"the record's policy is unreadable ({type(exc).__name__}: {exc}): judged by " \
                         "trainguard's defaults"
    return Policies(SuspectPolicy(), StormPolicy(), bad or NO_POLICY)
