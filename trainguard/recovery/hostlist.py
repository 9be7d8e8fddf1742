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


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compress(names: list[str] | tuple[str, ...]) -> str:
    """The inverse of `expand`, for reading: node1,node2,node3,node7 -> node[1-3,7]. Names are
    grouped by prefix and digit width in the order first seen; a name without a trailing
    number stays as it is."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        m = _NUMBERED.match(name)
        if m is None:
            order.append(name)
            continue
        digits = m.group(2)
        key = (m.group(1), len(digits) if digits.startswith("0") and len(digits) > 1 else 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    return ",".join(item if isinstance(item, str) else _group(item, groups[item]) for item in order)


def _group(key: tuple[str, int], numbers: list[int]) -> str:
    prefix, width = key
    spans: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    text = ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in spans)
    return f"{prefix}{text}" if len(spans) == 1 and spans[0][0] == spans[0][1] else f"{prefix}[{text}]"


def readable(names: list[str] | tuple[str, ...], listed: int = 8, chars: int = 300) -> str:
    """Names for a sentence: a comma list when few, a host list when many, cut at `chars`
    with how many more (a line of the answer stays short however large the allocation)."""
    text = ",".join(names) if len(names) <= listed else compress(names)
    if len(text) <= chars:
        return text
    shown: list[str] = []
    for name in names[:256]:   # the longest head of the list whose host list fits (bounded work)
        if len(compress([*shown, name])) > chars - 40:
            break
        shown.append(name)
    return f"{compress(shown)} and {len(names) - len(shown)} more"
