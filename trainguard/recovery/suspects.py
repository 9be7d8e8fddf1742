"""Suspect nodes: which nodes a run's failures implicate, and which of them to exclude.

A run records each implicated node in its run folder (`trainguard.recovery.journal`):

- `hang`: the node of the rank that stopped first in a hang (trainguard.hangs.response);
- `node_fail`: the nodes of a NODE_FAIL;
- `rank_died`: a rank that died by a signal or a device/communication error while its
  peers were healthy;
- `drained`: a node Slurm drained while the run was on it (the watchdog records it);
- `precheck`: a node that failed the check before a restart.

The policy (`SuspectPolicy`, from `TRAINGUARD_SUSPECT_*` settings): within `window`, a node
implicated once by a cause in `at_once` (hang, precheck), or `limit` times for any reason,
is excluded. One failure seen by several ranks (the same job, node, cause and step) counts
once.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainguard.recovery import journal

log = logging.getLogger("trainguard")

CAUSES = ("hang", "node_fail", "rank_died", "drained", "precheck")
CAUSE_WORDS = {"hang": "hang", "node_fail": "node failure", "rank_died": "a rank died",
               "drained": "drained by Slurm", "precheck": "failed the check before a restart"}
COUNTED_WORDS = {"hang": "hangs", "node_fail": "node failures", "rank_died": "ranks died",
                 "drained": "drains by Slurm", "precheck": "failed checks before a restart"}
WHY_LISTED = 3             # suspicions of one node listed one by one; beyond, counted
DETAIL_MAX = 300


@dataclass(frozen=True)
class Suspicion:
    node: str
    cause: str                 # one of CAUSES
    at: float                  # time.time() of the failure
    job: str
    step: int = -1             # the last step completed when it happened (-1: unknown)
    detail: str = ""           # e.g. "rank 3, in all_reduce"

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"cause = {self.cause!r}: expected one of {', '.join(CAUSES)}")
        if not self.node or any(c in self.node for c in ", \t\n[]"):
            raise ValueError(f"node = {self.node!r}: expected one node name (no list, no spaces)")

    def sentence(self) -> str:
        at_step = f" at step {self.step:,}" if self.step >= 0 else ""
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.node} suspect: {CAUSE_WORDS[self.cause]}{at_step}{detail}, job {self.job or '?'}"

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.job, self.node, self.cause, self.step)


@dataclass(frozen=True)
class SuspectPolicy:
    window: float = 86400.0
    at_once: frozenset[str] = field(default_factory=lambda: frozenset({"hang", "precheck"}))
    limit: int = 2             # suspicions of any cause; 0: never by count

    def __post_init__(self) -> None:
        unknown = set(self.at_once) - set(CAUSES)
        if unknown:
            raise ValueError(f"suspect_at_once = {sorted(unknown)}: expected causes among "
                             f"{', '.join(CAUSES)}")
        if self.limit < 0 or self.window <= 0:
            raise ValueError(f"suspect_limit = {self.limit}, suspect_window = {self.window}: "
                             "expected a count >= 0 and a duration > 0")


@dataclass(frozen=True)
class Verdict:
    node: str
    suspicions: tuple[Suspicion, ...]   # within the window, one per failure, oldest first
    excluded: bool

    def why(self) -> str:
        """"node2: hang at step 41,200" for a few suspicions; beyond WHY_LISTED, counted per
        cause ("node7: 3 hangs, 1 rank died; last at step 41,200"): bounded however many."""
        if len(self.suspicions) <= WHY_LISTED:
            causes = ", ".join(f"{CAUSE_WORDS[s.cause]}" + (f" at step {s.step:,}" if s.step >= 0 else "")
                               for s in self.suspicions)
            return f"{self.node}: {causes}"
        counts = Counter(s.cause for s in self.suspicions)
        counted = ", ".join(f"{n} {COUNTED_WORDS[c] if n > 1 else CAUSE_WORDS[c]}"
                            for c, n in counts.most_common())
        last = self.suspicions[-1].step
        return f"{self.node}: {counted}" + (f"; last at step {last:,}" if last >= 0 else "")

    @property
    def causes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.cause for s in self.suspicions))


def record(run_dir: Path, s: Suspicion, policy: Mapping[str, Any] | None = None) -> None:
    """Append the suspicion to the run's record, with the policy in force (its fields, see
    trainguard.recovery.policy); OSError when the folder takes no file."""
    fields: dict[str, Any] = {"node": s.node, "cause": s.cause, "job": s.job, "step": s.step,
                              "detail": s.detail[:DETAIL_MAX]}
    if policy is not None:
        fields["policy"] = dict(policy)
    journal.append(run_dir, "suspect", s.at, s.sentence(), fields)


def read(run_dir: Path) -> tuple[list[Suspicion], tuple[str, ...]]:
    """The recorded suspicions (oldest first) and the problems met reading them."""
    j = journal.read(run_dir)
    found, problems = [], list(j.problems)
    for e in j.of("suspect"):
        try:
            f = e.fields
            found.append(Suspicion(str(f["node"]), str(f["cause"]), e.at, str(f.get("job", "")),
                                   int(f.get("step", -1)), str(f.get("detail", ""))))
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"{e.origin}: not a suspicion: {exc}")
    return found, tuple(problems)


def judge(suspicions: Iterable[Suspicion], now: float, policy: SuspectPolicy) -> list[Verdict]:
    """Every node suspected within the window, by node name, with the policy's verdict."""
    by_node: dict[str, dict[tuple[str, str, str, int], Suspicion]] = {}
    for s in suspicions:
        if now - policy.window <= s.at <= now + 60:   # a clock a minute ahead still counts
            by_node.setdefault(s.node, {}).setdefault(s.key, s)
    verdicts = []
    for node in sorted(by_node):
        seen = tuple(sorted(by_node[node].values(), key=lambda s: s.at))
        out = any(s.cause in policy.at_once for s in seen) or 0 < policy.limit <= len(seen)
        verdicts.append(Verdict(node, seen, out))
    return verdicts


def to_exclude(run_dir: Path, now: float, policy: SuspectPolicy) -> list[str]:
    """The nodes the policy excludes now; a record that cannot be read excludes nothing it
    cannot read (each problem is logged as a warning)."""
    found, problems = read(run_dir)
    for problem in problems:
        log.warning("trainguard: suspect record: %s (left out)", problem)
    return [v.node for v in judge(found, now, policy) if v.excluded]
