"""`scontrol -o show ...` one-liners (reservations, nodes): Key=Value pairs on one line.

How a finished job ended comes from accounting instead (watchdogs.slurmctl.sacct, one
batched call per tick); the controller's memory of it from the tick's squeue snapshot."""
from __future__ import annotations

import re

_PAIR = re.compile(r"(?:^|\s)([A-Za-z][\w/:]*)=(.*?)(?=\s+[A-Za-z][\w/:]*=|$)")


def parse_scontrol_oneliner(text: str) -> dict[str, str]:
    """Key=Value pairs of the first line; values may hold spaces."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return {m.group(1): m.group(2) for m in _PAIR.finditer(line)}
