"""One `sinfo --Node` call per tick for every `nodes` check, and what a node state means."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from watchdogs.errors import SlurmError
from watchdogs.slurmctl.hostlist import expand
from watchdogs.slurmctl.jobinfo import parse_scontrol_oneliner
from watchdogs.slurmctl.runner import SlurmRunner
from watchdogs.slurmctl.slurmtime import parse_timestamp

SEP = "\x1f"
# node, partition, long state, who set the reason, when, the reason (free text: last).
FIELDS = ("%N", "%R", "%T", "%u", "%H", "%E")
FORMAT = SEP.join(FIELDS)
# State suffixes: * not responding, ~ powered off, # powering up, ! pending power down,
# % powering down, $ maintenance, @ pending reboot, ^ reboot issued, - planned.
_FLAGS = "*~#!%$@^-"
_BAD_WORDS = ("down", "drain", "fail", "inval", "unknown", "not_responding")
_USABLE = ("idle", "mixed", "allocated", "completing", "planned", "reserved")


@dataclass(frozen=True)
class NodeRow:
    name: str
    partition: str
    state: str
    reason_user: str | None
    reason_time: datetime | None
    reason: str | None

    @property
    def base_state(self) -> str:
        return self.state.rstrip(_FLAGS).lower()

    @property
    def bad(self) -> bool:
        """Drained, draining, down or failing. Not responding alone (`idle*`) is not bad yet:
        it shows for a moment after every resume, and Slurm itself marks a node that stays
        silent past SlurmdTimeout DOWN."""
        return any(w in self.base_state for w in _BAD_WORDS)

    @property
    def available(self) -> bool:
        return not self.bad and "*" not in self.state and self.base_state.split("+")[0] in _USABLE

    @property
    def idle(self) -> bool:
        return self.available and self.base_state == "idle"


def sinfo_argv() -> list[str]:
    return ["sinfo", "--noheader", "--Node", "-o", FORMAT]


def parse_sinfo(text: str) -> tuple[NodeRow, ...]:
    rows = []
    for line in text.splitlines():
        f = line.split(SEP, len(FIELDS) - 1)
        if len(f) != len(FIELDS):
            continue
        user = None if f[3] in ("", "Unknown", "(null)") else f[3]
        reason = None if f[5] in ("", "none", "(null)") else f[5]
        rows.append(NodeRow(f[0], f[1], f[2], user, parse_timestamp(f[4]), reason))
    return tuple(rows)


def run_sinfo(timeout: float, env: Mapping[str, str] | None, runner: SlurmRunner) -> tuple[NodeRow, ...]:
    return parse_sinfo(runner(sinfo_argv(), timeout=timeout, env=env).stdout)


def reservation_nodes(name: str, timeout: float, env: Mapping[str, str] | None,
                      runner: SlurmRunner) -> list[str]:
    """The nodes of a reservation (`scontrol show reservation NAME --oneliner`)."""
    reply = runner(["scontrol", "--oneliner", "show", "reservation", name], timeout=timeout, env=env)
    fields = parse_scontrol_oneliner(reply.stdout)
    if fields.get("ReservationName") != name:
        raise SlurmError(f"no reservation named {name!r}")
    nodes = fields.get("Nodes", "")
    return expand(nodes) if nodes and nodes != "(null)" else []
