"""The one line that says what happened and what was done (issue 22, item 7):

    node2 stopped the run at step 41,200 (rank 3, in all_reduce); node2 excluded; training
    resumed at 03:07 on node1,node3 from step 41,000, 4 min after the fault; 1 spare left

Pure: built from the restart, the suspicion that caused it and where the run went on.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from trainguard._units import format_duration
from trainguard.recovery import hostlist
from trainguard.recovery.restarts import Restart, Storm
from trainguard.recovery.suspects import CAUSE_WORDS, Suspicion

SUMMARY_FILE = "summary.txt"


@dataclass(frozen=True)
class Placement:
    """Where the run goes on: the latest `plan` (in place) or `exclude` (requeue) answer."""

    exclude: tuple[str, ...] = ()
    use: tuple[str, ...] = ()
    spares_left: int | None = None


def what_happened(restart: Restart, suspicion: Suspicion | None) -> str:
    if suspicion is None:
        node = f" on {restart.node}" if restart.node else ""
        return f"the run stopped ({CAUSE_WORDS.get(restart.cause, restart.cause)}{node})"
    detail = f" ({suspicion.detail})" if suspicion.detail else ""
    at = f" at step {suspicion.step:,}" if suspicion.step >= 0 else ""
    if suspicion.cause == "rank_died":   # "died" said outright: the reader greps for it
        return f"a rank on {suspicion.node} died{at}{detail}"
    verb = {"hang": "stopped the run", "node_fail": "failed",
            "drained": "was drained", "precheck": "failed the check before a restart"}[suspicion.cause]
    return f"{suspicion.node} {verb}{at}{detail}"


def summarize(restart: Restart, suspicion: Suspicion | None, placement: Placement) -> str:
    parts = [what_happened(restart, suspicion)]
    # As a host list: with many nodes excluded, the comma list made a line of kilobytes.
    parts.append(f"{hostlist.readable(placement.exclude)} excluded" if placement.exclude
                 else "no node excluded")
    clock = time.strftime("%H:%M", time.localtime(restart.at))
    start = f"from step {restart.step:,}" if restart.step >= 0 else "from the start"
    after = (f", {format_duration(max(0.0, restart.at - suspicion.at))} after the fault"
             if suspicion is not None else "")
    if restart.kind == "inplace":
        on = f" on {hostlist.readable(placement.use)}" if placement.use else ""
        parts.append(f"training resumed at {clock}{on} {start}{after}")
    else:
        verb = "requeued" if restart.kind == "requeue" else "resubmitted"
        parts.append(f"job {restart.job} {verb} at {clock}, to resume {start}{after}")
    if placement.spares_left is not None:
        parts.append(f"{placement.spares_left} spare{'s' if placement.spares_left != 1 else ''} left")
    return "; ".join(parts)


def storm_page(storm: Storm) -> str:
    return (f"restart storm: {storm.reason}; the chain ends here on purpose (no requeue, no "
            f"resubmission). Fix the cause, then resubmit.")


def newest_suspicion(suspicions: Sequence[Suspicion], job: str, node: str) -> Suspicion | None:
    """The newest failure of `job` on `node` (a node or a comma-separated list; "" any).
    One failure may be recorded twice (by the hang path and by the template): the record
    that says the most (its detail) speaks for it."""
    nodes = {n for n in node.split(",") if n}
    mine = [s for s in suspicions if s.job == job and (not nodes or s.node in nodes)]
    newest = max(mine, key=lambda s: s.at, default=None)
    if newest is None:
        return None
    same = [s for s in mine if s.key == newest.key]
    return max(same, key=lambda s: (bool(s.detail), s.at))
