"""Optional self-healing for a `job` check: resubmit a gone job when how it ended says a
resubmit can help, within a crash-loop limit.

The policy is keyed on the ending (see `ENDINGS`); the decision is a pure function of the
ending, the resubmit history and the time. Only `submit` touches Slurm.

| ending               | default      | why                                                      |
|----------------------|--------------|----------------------------------------------------------|
| node_fail            | resubmit     | the node failed, not the job; `--exclude` the node(s)    |
| preempted            | resubmit     | a higher-priority job took the resources                 |
| timeout_saved        | resubmit     | it saved a checkpoint during this run: it will progress  |
| timeout_unsaved      | no           | no new checkpoint: it would redo the same work           |
| out_of_memory        | no           | the same request would fail again; raise --mem           |
| failed_fast          | no           | failed within `fail_fast` of its start: a bug or bad input |
| failed               | resubmit     | failed later (a transient error, a flaky filesystem)     |
| cancelled_by_owner   | no           | a person decided                                         |
| cancelled_by_other   | no           | an administrator (or another user) decided               |
| unknown              | no           | accounting recorded an end it does not name              |
| completed            | never        | done                                                     |

Whatever the table says, nothing is submitted without positive evidence (issue 28): an
accounting record of how the last run ended (`Ending.facts.source == "sacct"`), and, just
before sbatch, a second clean squeue listing with no run of the job alive
(watchdogs.checks.jobgone). Without accounting's record the job may still be running where
the controller's answer did not show it: a second copy of a training is the harm.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from watchdogs import humanize

if TYPE_CHECKING:
    # The policy's names and defaults above are the `job` check's option table, which
    # `validate` and `status` build without ever deciding: the endings (and sacct behind
    # them) are imported by the functions that decide.
    from watchdogs.slurmctl import ending as e
    from watchdogs.slurmctl.runner import SlurmRunner

ENDINGS = ("node_fail", "preempted", "timeout_saved", "timeout_unsaved", "out_of_memory",
           "failed_fast", "failed", "cancelled_by_owner", "cancelled_by_other", "unknown")
DEFAULT_RESUBMIT_ON = ("node_fail", "preempted", "timeout_saved", "failed")
DEFAULT_FAIL_FAST = 600.0


@dataclass(frozen=True)
class ResubmitPolicy:
    script: Path
    limit: int
    window: float
    kill_switch: Path
    resubmit_on: frozenset[str] = frozenset(DEFAULT_RESUBMIT_ON)
    fail_fast: float = DEFAULT_FAIL_FAST
    checkpoints_known: bool = False
    """A checkpoint folder is configured, so "saved during this run" can be told."""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    why: str
    """A sentence for the alert: "Not resubmitted: ..." or "1st of at most 3 in 6 h 00 min"."""
    recent: tuple[float, ...]
    exclude: tuple[str, ...] = ()
    key: str = ""
    """The ending key of the policy table that decided."""


def ending_key(ending: e.Ending | None, policy: ResubmitPolicy, last_resubmit: float | None) -> str:
    """Which row of the policy table this ending falls in ("completed" is not a row)."""
    from watchdogs.slurmctl import ending as e

    if ending is None or not ending.known:
        return "unknown"
    f = ending.facts
    if ending.kind == e.TIMEOUT:
        return "timeout_saved" if ending.saved_during_run(last_resubmit) else "timeout_unsaved"
    if ending.kind == e.FAILED:
        return "failed_fast" if f.start is not None and f.elapsed < policy.fail_fast else "failed"
    if ending.kind == e.CANCELLED:
        return "cancelled_by_other" if f.by_owner is False else "cancelled_by_owner"
    return ending.kind


def _why_not(key: str, ending: e.Ending | None, policy: ResubmitPolicy) -> str:
    if key == "out_of_memory":
        return "the same request would fail again; raise --mem"
    if key == "failed_fast":
        return (f"it failed within {humanize.duration(policy.fail_fast)} of its start (fail_fast): "
                "more likely a bug or a bad input, which a resubmit would only repeat")
    if key == "timeout_unsaved":
        if not policy.checkpoints_known:
            return ("it cannot be told whether it saved progress (set `checkpoints` to the "
                    "training's checkpoint folder)")
        return "no checkpoint was saved during this run, so it would redo the same work"
    if key == "cancelled_by_owner":
        return "it was cancelled by its owner"
    if key == "cancelled_by_other":
        by = ending.facts.cancelled_by if ending is not None else None
        return f"it was cancelled by {by or 'someone'}, not its owner"
    return f"`resubmit_on` does not include {key}"


def decide(policy: ResubmitPolicy, history: Sequence[float], now: float, kill_switch_exists: bool,
           ending: e.Ending | None, last_resubmit: float | None = None, storm: str | None = None
           ) -> Decision:
    """`storm`: the restart storm the run's record names for this job (trainguard's
    `restart` ended the chain on purpose), if any."""
    from watchdogs.slurmctl import ending as e

    recent = tuple(t for t in history if now - t < policy.window)
    key = "completed" if ending is not None and ending.kind == e.COMPLETED else \
        ending_key(ending, policy, last_resubmit)
    if kill_switch_exists:
        return Decision(False, f"Not resubmitted: kill switch {policy.kill_switch} exists", recent,
                        key=key)
    if key == "completed":
        return Decision(False, "Not resubmitted: the last run completed successfully", recent, key=key)
    if storm:
        return Decision(False, f"Not resubmitted: the run ended its chain on purpose after a restart "
                               f"storm ({storm})", recent, key="storm")
    if ending is None or ending.facts.source != "sacct":
        said = f" ({ending.facts.degraded})" if ending is not None and ending.facts.degraded else ""
        return Decision(False, "Not resubmitted: accounting has no record of how it ended"
                               f"{said}; a resubmit needs one, so that a training that may still "
                               "run is never started twice", recent, key="no_evidence")
    if key not in policy.resubmit_on:
        return Decision(False, f"Not resubmitted: {_why_not(key, ending, policy)}", recent, key=key)
    if len(recent) >= policy.limit:
        return Decision(False, f"Not resubmitted: crash loop ({len(recent)} resubmits in the last "
                               f"{humanize.duration(policy.window)}, limit {policy.limit})", recent,
                        key=key)
    exclude = tuple(n for n, _ in ending.failed_nodes)
    if key == "node_fail" and not exclude and ending.facts.nnodes == 1:
        exclude = (ending.facts.nodelist,)  # the one node it ran on, back or not
    return Decision(True, f"{humanize.ordinal(len(recent) + 1)} of at most {policy.limit} in "
                          f"{humanize.duration(policy.window)}", recent, exclude, key)


def exclusion(failed: Sequence[str], suspects: Sequence[tuple[str, str]], usable: Sequence[str] | None,
              need: int) -> tuple[tuple[str, ...], str]:
    """The nodes to `--exclude`: those that failed the run (NODE_FAIL) and the run's suspects
    (node, why), unless that leaves fewer usable nodes in the job's partition than it
    needs; with a sentence for the alert ("" when there is nothing to say). `usable` None:
    the partition's nodes cannot be told, so only the failed nodes are excluded (as before
    suspects were recorded) and the suspects are not."""
    wanted = list(dict.fromkeys([*failed, *(n for n, _ in suspects)]))
    if not wanted:
        return (), ""
    why = "; ".join(w for n, w in suspects if n in wanted)
    if usable is None:
        skipped = [n for n, _ in suspects if n not in failed]
        return tuple(failed), (f"suspect nodes not excluded ({why}): the job's partition and its "
                               "nodes cannot be told, and excluding on doubt may leave it too few"
                               if skipped else "")
    left = [n for n in usable if n not in wanted]
    if len(left) < need:
        return (), (f"not excluding {', '.join(wanted)}: that would leave {len(left)} usable "
                    f"node{'s' if len(left) != 1 else ''} in the partition, and the job needs {need}")
    return tuple(wanted), (f"suspect nodes excluded: {why}" if why else "")


def submit(script: Path, job_name: str | None, cluster: str | None, timeout: float,
           env: Mapping[str, str] | None, runner: SlurmRunner, exclude: Sequence[str] = ()) -> str:
    """sbatch the script from its own folder (its relative paths mean what they meant when
    a person submitted it), under the watched name so the next tick finds it, avoiding the
    nodes that failed it. A script someone else could have changed is never submitted
    (watchdogs.trust; checked again here: the config was validated long ago)."""
    from watchdogs.errors import SlurmError
    from watchdogs.trust import distrust

    found = distrust(script)
    if found is not None:
        raise SlurmError(f"not submitted, the script is not only yours: {found}")
    argv = ["sbatch", "--parsable", f"--chdir={script.parent}"]
    if job_name:
        argv.append(f"--job-name={job_name}")
    if cluster:
        argv.append(f"--clusters={cluster}")
    if exclude:
        argv.append(f"--exclude={','.join(exclude)}")
    reply = runner([*argv, str(script)], timeout=timeout, env=env)
    return reply.stdout.strip().split(";")[0]
