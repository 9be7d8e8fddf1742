"""How a finished job ended: `scontrol show job` while the controller remembers it
(MinJobAge), else `sacct` when accounting is on. Asked only when a watched job is gone."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from watchdogs.errors import SlurmError
from watchdogs.slurmctl.runner import SlurmRunner
from watchdogs.slurmctl.slurmtime import format_clock, parse_timestamp

_PAIR = re.compile(r"(?:^|\s)([A-Za-z][\w/:]*)=(.*?)(?=\s+[A-Za-z][\w/:]*=|$)")
SACCT_FIELDS = ("JobID", "State", "ExitCode", "End", "Reason")


@dataclass(frozen=True)
class LastState:
    job_id: str
    state: str
    exit_code: str = ""
    reason: str = ""
    end: datetime | None = None
    source: str = ""

    def describe(self, now: datetime) -> str:
        """"job 5 ended FAILED (exit 3:0, NonZeroExitCode) at 14:02"."""
        extras = [x for x in (f"exit {self.exit_code}" if self.exit_code else "",
                              self.reason if self.reason not in ("", "None") else "") if x]
        text = f"job {self.job_id} ended {self.state}"
        if extras:
            text += f" ({', '.join(extras)})"
        if self.end is not None:
            text += f" at {format_clock(self.end, now)}"
        return text


def parse_scontrol_oneliner(text: str) -> dict[str, str]:
    """`scontrol -o show job N`: Key=Value pairs on one line; values may hold spaces."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return {m.group(1): m.group(2) for m in _PAIR.finditer(line)}


def from_scontrol(fields: Mapping[str, str]) -> LastState | None:
    if "JobId" not in fields or "JobState" not in fields:
        return None
    return LastState(fields["JobId"], fields["JobState"], fields.get("ExitCode", ""),
                     fields.get("Reason", ""), parse_timestamp(fields.get("EndTime", "")),
                     "scontrol")


def parse_sacct(text: str, job_id: str) -> LastState | None:
    """`sacct -n -P -X -o JobID,State,ExitCode,End,Reason`: the allocation's own line."""
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) >= len(SACCT_FIELDS) and parts[0] == job_id:
            state = parts[1].split()[0] if parts[1] else ""
            return LastState(job_id, state, parts[2], parts[4], parse_timestamp(parts[3]), "sacct")
    return None


def last_state(job_id: str, timeout: float, env: Mapping[str, str] | None,
               runner: SlurmRunner) -> LastState | None:
    """What the controller, then accounting, knows; None when neither remembers the job."""
    try:
        reply = runner(["scontrol", "-o", "show", "job", job_id], timeout=timeout, env=env)
        found = from_scontrol(parse_scontrol_oneliner(reply.stdout))
        if found is not None:
            return found
    except SlurmError:
        pass  # "Invalid job id": forgotten after MinJobAge; accounting may still know it
    try:
        reply = runner(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", ",".join(SACCT_FIELDS)],
                       timeout=timeout, env=env)
    except SlurmError:
        return None  # accounting off or unreachable: nothing more to learn
    return parse_sacct(reply.stdout, job_id)
