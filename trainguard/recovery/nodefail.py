"""A node of the allocation failed (issue 22): what the job itself sees once its training step
ended, when it was submitted with `sbatch --no-kill` (the templates are).

With --no-kill, Slurm does not end the job when a node of its allocation fails: it removes
the node from the job (`scontrol show job` no longer lists it; $SLURM_JOB_NODELIST in the
batch shell still does: it is never updated), ends the step that ran on it ("srun: error:
Node failure on node2", exit 137), and the batch shell may start new steps on the nodes left.
So after a step ended by a fault, the batch shell asks, once: `scontrol show job` (the nodes
the job still has) and `sinfo` (their states: down, or "*" for not responding). A node that
left the job or that Slurm reports down or not responding has failed: it is recorded as a
suspect (cause node_fail) and left out of the next node set whatever the suspect policy says
(a node that is down cannot be used). Both calls happen only after a fault, from the job.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainguard.errors import SlurmError
from trainguard.heartbeat import Heartbeat
from trainguard.recovery import hostlist, suspects
from trainguard.slurm.run import Reply, run_slurm

Runner = Callable[[Sequence[str]], Reply]


@dataclass(frozen=True)
class Lost:
    """The failed nodes of the allocation, and what Slurm said of each, in words."""

    nodes: tuple[str, ...]
    remaining: tuple[str, ...]          # the allocation without them
    details: tuple[str, ...]            # one per node, e.g. "NODE_FAIL: down, not responding"
    ending: bool = False                # the job itself is ending (a scancel): no node failure


def state_words(state: str) -> tuple[str, ...]:
    """sinfo's short state in words, when it says the node failed: () when it did not."""
    s = state.strip().lower()
    words = []
    base = s.rstrip("~#!%$@^-+*")
    if base.startswith(("down", "fail")):
        words.append("down" if base.startswith("down") else "failing")
    if s.endswith("*"):
        words.append("not responding")
    return tuple(words)


def lost_nodes(allocation: Sequence[str], current: Sequence[str] | None,
               states: Mapping[str, str]) -> Lost:
    """The nodes of `allocation` that the job no longer has (`current`: the job's node list
    now; None when unknown) or that Slurm reports down or not responding."""
    failed, details = [], []
    for node in allocation:
        words = list(state_words(states.get(node, "")))
        if current is not None and node not in current:
            words.append("removed from the job")
        if words:
            failed.append(node)
            details.append("NODE_FAIL: " + ", ".join(words))
    return Lost(tuple(failed), tuple(n for n in allocation if n not in failed), tuple(details))


def when(beats: Sequence[Heartbeat], job: str, nodes: Sequence[str]) -> tuple[int, float | None]:
    """The step the run had reached when the nodes failed (the furthest rank's: the healthy
    ranks went on until the failure stopped them; -1: no heartbeat), and the time of the
    failed nodes' last heartbeat (about when they failed; None: none)."""
    mine = [b for b in beats if b.job_id == job]
    last = [b.time for b in mine if b.host in nodes]
    return max((b.step for b in mine), default=-1), max(last) if last else None


def noted_at(run_dir: Path, job: str, nodes: Sequence[str], at: float | None) -> float | None:
    """When to note the node failure. A node that goes silent is often seen first as a hang
    (its peers wait for it) and noted as one, a moment after its last heartbeat: the failure's
    note comes just after the run's newest note of the node, so the summary tells the failure
    (its newest cause), timed from when the run first stopped; else at its last heartbeat."""
    found, _ = suspects.read(run_dir)
    newest = max((s.at for s in found if s.job == job and s.node in nodes), default=None)
    if newest is None or (at is not None and at > newest):
        return at
    return newest + 0.001


def job_nodes(job: str, run: Runner = run_slurm) -> tuple[str, list[str] | None]:
    """The job's state and node list now (one `scontrol show job`); None: cannot be told."""
    try:
        text = run(["scontrol", "show", "job", "-o", job]).stdout
    except SlurmError:
        return "", None
    fields = dict(item.split("=", 1) for item in text.split() if "=" in item)
    value = fields.get("NodeList", "")
    try:
        nodes = hostlist.expand(value) if value not in ("", "(null)") else None
    except ValueError:
        nodes = None
    return fields.get("JobState", ""), nodes


def node_states(nodes: Sequence[str], run: Runner = run_slurm) -> dict[str, str]:
    """sinfo's short state of each node (one sinfo); {} when it cannot be told."""
    if not nodes:
        return {}
    try:
        text = run(["sinfo", "--noheader", "--Node", f"--nodes={','.join(nodes)}", "--format=%N|%t"]).stdout
    except SlurmError:
        return {}
    rows = (line.strip().partition("|") for line in text.splitlines())
    return {name: state for name, sep, state in rows if sep and name}


def look(job: str, allocation: Sequence[str], run: Runner = run_slurm) -> Lost:
    """Ask Slurm (one scontrol, one sinfo) which nodes of the allocation failed. A job that
    is no longer RUNNING (a scancel, a time limit: its nodes are being released) lost none."""
    state, current = job_nodes(job, run)
    if state not in ("", "RUNNING"):
        return Lost((), tuple(allocation), (), ending=True)
    return lost_nodes(allocation, current, node_states(allocation, run))
