"""Which nodes to use or exclude, from the suspects and what Slurm offers. Pure functions,
apart from `partition_nodes` (one sinfo)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainguard.recovery import hostlist
from trainguard.recovery.suspects import CAUSE_WORDS, Verdict
from trainguard.slurm.run import Reply, run_slurm

# Bounds of the words (the why= line): a run with every node suspect once gave a 52 KB line.
REASONS_MAX = 600          # characters of reasons listed node by node; beyond, summarised
NODES_NAMED = 5            # nodes named in a summary, as a host list
# sinfo's short states in which a node takes no new job (a trailing "*": not responding)
UNUSABLE = ("down", "drain", "drng", "fail", "maint", "futr", "unk", "inval", "npc", "pow_dn", "reboot")


@dataclass(frozen=True)
class Plan:
    use: tuple[str, ...]
    exclude: tuple[str, ...]
    spares_left: int
    enough: bool
    why: str

    def lines(self) -> list[str]:
        return [f"exclude={','.join(self.exclude)}", f"use={','.join(self.use)}",
                f"spares_left={self.spares_left}", f"enough={'yes' if self.enough else 'no'}",
                f"why={self.why}"]


@dataclass(frozen=True)
class Exclusion:
    exclude: tuple[str, ...]
    why: str

    def lines(self) -> list[str]:
        return [f"exclude={','.join(self.exclude)}", f"why={self.why}"]


def in_place(allocation: Sequence[str], need: int, verdicts: Sequence[Verdict],
             down: Sequence[str] = ()) -> Plan:
    """The nodes of the allocation to restart on, suspects and failed (`down`) nodes left out:
    a node that is down or gone from the job cannot be used, whatever the suspect policy."""
    out = _reasons(verdicts, down)
    suspects = tuple(n for n in allocation if n in out)
    healthy = [n for n in allocation if n not in out]
    reasons = _reasons_text(suspects, out, verdicts)
    if len(healthy) < need:
        return Plan((), suspects, 0, False,
                    f"only {len(healthy)} of the allocation's {len(allocation)} nodes are not suspect "
                    f"({reasons}); the training needs {need}")
    left = len(healthy) - need
    why = (f"excluded {reasons}" if suspects else "no suspect node in the allocation") + \
        f"; {left} spare{'s' if left != 1 else ''} left"
    return Plan(tuple(healthy[:need]), suspects, left, True, why)


def _reasons_text(nodes: Sequence[str], out: dict[str, str], verdicts: Sequence[Verdict]) -> str:
    """Why `nodes` are left out: each node's reasons while short; beyond REASONS_MAX, the
    count per cause, the first few nodes as a host list, and how many more."""
    listed = "; ".join(out[n] for n in nodes)
    if len(listed) <= REASONS_MAX:
        return listed
    wanted = set(nodes)
    per_cause: dict[str, int] = {}
    for v in verdicts:
        if v.node in wanted and v.excluded:
            for cause in v.causes:
                per_cause[cause] = per_cause.get(cause, 0) + 1
    suspect = {v.node for v in verdicts if v.excluded}
    failed = sum(1 for n in nodes if n not in suspect)
    counts = [f"{n} {CAUSE_WORDS.get(c, c)}" for c, n in sorted(per_cause.items(), key=lambda i: -i[1])]
    counts += [f"{failed} failed (down or gone from the job)"] if failed else []
    more = len(nodes) - NODES_NAMED
    named = hostlist.compress(list(nodes[:NODES_NAMED]))
    return (f"{len(nodes)} nodes ({', '.join(counts)}): {named}" +
            (f" and {more} more (`python -m trainguard.recovery show --run-dir ...` lists them)"
             if more > 0 else ""))


def _reasons(verdicts: Sequence[Verdict], down: Sequence[str]) -> dict[str, str]:
    """node -> why it is left out: the policy's suspects, then the failed nodes."""
    out = {v.node: v.why() for v in verdicts if v.excluded}
    for node in down:
        out.setdefault(node, f"{node}: failed (down or gone from the job; not usable)")
    return out


def for_partition(nodes: Sequence[tuple[str, str]], need: int, verdicts: Sequence[Verdict],
                  down: Sequence[str] = ()) -> Exclusion:
    """The suspects and failed (`down`) nodes to exclude from a requeue or resubmission: none
    when that would leave fewer usable nodes in the partition than the job needs."""
    out = _reasons(verdicts, down)
    if not out:
        return Exclusion((), "no suspect node")
    names = {n for n, _ in nodes}
    usable = {n for n, state in nodes if usable_state(state)}
    left = usable - set(out)
    reasons = _reasons_text(list(out), out, verdicts)
    if len(left) < need:
        return Exclusion((), f"not excluding {hostlist.readable(list(out))} ({reasons}): that would "
                             f"leave {len(left)} usable node{'s' if len(left) != 1 else ''} of the "
                             f"partition's {len(names)}, and the job needs {need}")
    return Exclusion(tuple(out), f"excluded {reasons}; {len(left)} usable nodes left")


def usable_state(state: str) -> bool:
    s = state.strip().lower()
    return not s.endswith("*") and not s.rstrip("~#!%$@^-+").startswith(UNUSABLE)


def partition_nodes(partition: str, run: Callable[[Sequence[str]], Reply] = run_slurm
                    ) -> list[tuple[str, str]]:
    """(node, short state) of every node of the partition(s): one sinfo. SlurmError when it
    cannot be asked or answers something unreadable."""
    from trainguard.errors import SlurmError

    reply = run(["sinfo", "--noheader", "--Node", f"--partition={partition}", "--format=%N|%t"])
    rows = {}
    for line in reply.stdout.splitlines():
        if not line.strip():
            continue
        name, sep, state = line.strip().partition("|")
        if not sep or not name:
            raise SlurmError(f"sinfo: unreadable line {line!r}")
        rows[name] = state   # a node in two partitions is listed twice
    if not rows:
        raise SlurmError(f"sinfo lists no node in partition {partition!r}")
    return sorted(rows.items())
