"""Slurm host lists: "node[1-3,07],gpu01" -> node1, node2, node3, node07, gpu01.

trainguard's own copy of watchdogs/slurmctl/hostlist.py (trainguard imports nothing from the
watchdog), so that the batch script needs no `scontrol show hostnames` call."""
from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def _expand_one(item: str) -> list[str]:
    match = re.match(r"^(.*?)\[([^\]]+)\](.*)$", item)
    if not match:
        return [item]
    prefix, ranges, rest = match.groups()
    names: list[str] = []
    for span in ranges.split(","):
        found = _RANGE.match(span)
        if not found:
            raise ValueError(f"bad host range {span!r} in {item!r}")
        low, high = found.group(1), found.group(2) or found.group(1)
        width = len(low) if low.startswith("0") else 0
        names.extend(f"{prefix}{n:0{width}d}" for n in range(int(low), int(high) + 1))
    return [n + tail for n in names for tail in _expand_one(rest)] if rest else names


def expand(hostlist: str) -> list[str]:
    return [name for item in _split_top(hostlist.strip()) for name in _expand_one(item)]
