"""How a job ended, in words a person woken at 3am understands: pure functions of what
accounting (or, degraded, the controller) recorded, the failed nodes' drain reasons and
the training's own progress records.

    "ran out of memory on node12 after 6 h 02 min: peak 61.8 GiB of the 64 GiB requested (97 %)"
    "was on node7 when the node failed (NODE_FAIL; node7: 'xid 79')"
    "hit its time limit of 24 h 00 min at step 41,200, having saved at step 41,000"

Never a false reason: what is inferred says so, and when neither accounting nor the
controller knows, the words say exactly that.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from watchdogs import humanize
from watchdogs.slurmctl.sacct import AcctRecord
from watchdogs.slurmctl.squeue import JobRow

# An OUT_OF_MEMORY job whose recorded MaxRSS is below this share of its request was killed
# between two samples (cgroup enforcement): its MaxRSS is not its peak.
SAMPLED_SHORT = 0.9
COMPLETED, OUT_OF_MEMORY, TIMEOUT, NODE_FAIL = "completed", "out_of_memory", "timeout", "node_fail"
PREEMPTED, FAILED, CANCELLED, UNKNOWN = "preempted", "failed", "cancelled", "unknown"
# A partition without a time limit shows one of a year or more (Slurm's INFINITE as minutes):
# "elapsed 36 s of 365 d 00 h" says nothing; no limit is said as none.
NO_LIMIT_S = 365 * 86400.0
_KINDS = {"COMPLETED": COMPLETED, "OUT_OF_MEMORY": OUT_OF_MEMORY, "TIMEOUT": TIMEOUT,
          "NODE_FAIL": NODE_FAIL, "BOOT_FAIL": NODE_FAIL, "PREEMPTED": PREEMPTED,
          "FAILED": FAILED, "DEADLINE": TIMEOUT, "CANCELLED": CANCELLED}


@dataclass(frozen=True)
class EndFacts:
    """What is known of one finished job, from accounting or (degraded) from squeue."""

    job_id: str
    name: str
    state: str
    source: str
    """"sacct", "squeue", or "" (nobody remembers the job)."""
    exit_code: str = ""
    start: datetime | None = None
    end: datetime | None = None
    elapsed: float = 0.0
    time_limit: float | None = None
    nodelist: str = ""
    nnodes: int = 0
    ncpus: int = 0
    mem_per_node: int | None = None
    max_rss: int | None = None
    total_cpu: float | None = None
    uid: int | None = None
    owner: str = ""
    cancelled_by: str | None = None
    """User name (or "uid N") that cancelled it, when accounting recorded it."""
    cancelled_by_uid: int | None = None
    reason: str = ""
    steps_killed: bool = False
    """A step ended by SIGKILL (Slurm's memory enforcement kills that way)."""
    earlier: tuple[str, ...] = ()
    workdir: str = ""
    degraded: str = ""
    """Why accounting was not used (unreachable, lagging, off), said in the alert."""

    @classmethod
    def from_sacct(cls, rec: AcctRecord, user_of: dict[int, str]) -> EndFacts:
        by = rec.cancelled_by
        return cls(rec.job_id, rec.name, rec.state, "sacct", rec.exit_code, rec.start, rec.end,
                   rec.elapsed, rec.time_limit, rec.nodelist, rec.nnodes, rec.ncpus,
                   rec.mem_per_node, rec.max_rss, rec.total_cpu, rec.uid, rec.user,
                   None if by is None else user_of.get(by, f"uid {by}"), by, rec.reason,
                   any(s.exit_code.endswith(":9") for s in rec.steps) or rec.exit_code.endswith(":9"),
                   rec.earlier, rec.workdir)

    @classmethod
    def from_squeue(cls, row: JobRow, degraded: str) -> EndFacts:
        return cls(row.raw_id, row.name, row.state, "squeue", start=row.start, end=row.end,
                   elapsed=row.elapsed, nodelist=row.nodelist, nnodes=row.num_nodes,
                   owner=row.user, reason="" if row.reason == "None" else row.reason,
                   degraded=degraded)

    @classmethod
    def unknown(cls, job_id: str, name: str, degraded: str) -> EndFacts:
        return cls(job_id, name, "", "", degraded=degraded)

    @property
    def by_owner(self) -> bool | None:
        if self.cancelled_by_uid is None or self.uid is None:
            return None
        return self.cancelled_by_uid == self.uid

    @property
    def memory_killed(self) -> bool:
        """Slurm's own OUT_OF_MEMORY, or (memory enforced by polling, OverMemoryKill) a
        SIGKILL after the peak passed the request: the job was killed for its memory."""
        if self.state == "OUT_OF_MEMORY":
            return True
        over = (self.max_rss is not None and self.mem_per_node is not None
                and self.max_rss > self.mem_per_node)
        return self.state in ("FAILED", "CANCELLED") and self.steps_killed and over


TRAINGUARD_EXITS = {
    3: "trainguard's requeue-loop protection (the chain restarted without advancing a step)",
    4: ("trainguard could not save a checkpoint for the requeue it wanted (the checkpoint folder is "
        "full, over quota or not writable): not requeued; free space or fix the folder, then resubmit"),
    5: "trainguard stopped on a NaN/Inf loss without saving the poisoned state: not requeued",
}
"""trainguard's exits that end a chain on purpose (docs/trainguard.md); 1 is the training's own."""


@dataclass(frozen=True)
class Progress:
    """The training's own records: trainguard's heartbeat and newest complete checkpoint."""

    step: int | None = None
    saved_step: int | None = None
    saved_at: float | None = None
    stopped_by: str | None = None
    """The guard stopped the run itself (trainguard.heartbeat.run_end): by what, in words
    ("the kill switch"; "trainguard" when its exit file does not say). None: it finished,
    or there is no record."""


@dataclass(frozen=True)
class Ending:
    facts: EndFacts
    kind: str
    failed_nodes: tuple[tuple[str, str], ...] = ()
    """(node, drain/down reason) for the job's nodes that are down or drained now."""
    progress: Progress = Progress()

    @property
    def known(self) -> bool:
        return self.kind != UNKNOWN

    def saved_during_run(self, since: float | None) -> bool:
        """A checkpoint committed after `since` (the last resubmit) and after this run began."""
        saved = self.progress.saved_at
        start = self.facts.start.timestamp() if self.facts.start else None
        floor = max(x for x in (since, start, float("-inf")) if x is not None)
        return saved is not None and saved > floor

    def sentence(self) -> str:
        """The whole explanation, starting with the job: "my-train (job 42) failed on ..."."""
        f = self.facts
        who = f"{f.name} (job {f.job_id})" if f.name else f"job {f.job_id}"
        if not f.source:
            return f"{who}: how it ended is unknown: {f.degraded}"
        text = f"{who} {self._what()}"
        if f.end is not None:
            text += f"; ended {humanize.moment(f.end)}"
        if f.source == "squeue":
            text += (f" (from the controller's memory only: accounting {f.degraded}; no exit "
                     "code, memory or CPU figures)")
        return text

    def _what(self) -> str:
        f, on = self.facts, f" on {self.facts.nodelist}" if self.facts.nodelist else ""
        after = f" after {humanize.duration(f.elapsed)}"
        if self.kind == OUT_OF_MEMORY:
            return f"ran out of memory{on}{after}: {self._memory()}"
        if self.kind == TIMEOUT:
            return self._timeout(after)
        if self.kind == NODE_FAIL:
            return self._node_fail(on)
        if self.kind == PREEMPTED:
            return f"was preempted{on}{after} (a higher-priority job took its resources)"
        if self.kind == FAILED:
            status = humanize.slurm_exit(f.exit_code)
            said = self._trainguard_code()
            return (f"failed{on}{after}" + (f": {status}" if status else " (exit status not recorded)")
                    + (f": {said}" if said else ""))
        if self.kind == CANCELLED:
            return f"was cancelled{self._by()}{after}"
        if self.kind == COMPLETED:
            step, by = self.progress.step, self.progress.stopped_by
            at = f" at step {humanize.count(step)}" if step is not None and step >= 0 else ""
            if by is not None and step is not None and step < 0:
                at = " before its first step"  # trainguard's records start at step -1
            if by is not None:
                # exit 0 after a stop is one the user asked for: the batch script does not requeue it
                return f"was stopped by {by}{at}, not requeued{on}{after} (exit 0: on purpose, not a failure)"
            return f"completed{at}{on}{after} (exit 0: finished, not a failure)"
        return f"ended {f.state}{on}{after}" + (f" ({f.reason})" if f.reason else "")

    def _memory(self) -> str:
        f = self.facts
        if f.max_rss is None or f.mem_per_node is None:
            return "peak memory not recorded"
        if f.state == "OUT_OF_MEMORY" and f.max_rss < f.mem_per_node * SAMPLED_SHORT:
            # The kernel (cgroup) killed it at its limit between two of Slurm's samples: the
            # recorded MaxRSS is a sample from before the growth, not the peak.
            return (f"the kernel killed it at its {humanize.size(f.mem_per_node)} limit (Slurm "
                    f"recorded {humanize.size(f.max_rss)} at its last sample before the kill; "
                    "memory grew faster than it samples)")
        text = (f"peak {humanize.size(f.max_rss)} of the {humanize.size(f.mem_per_node)} "
                f"requested ({humanize.percent(f.max_rss, f.mem_per_node)})")
        if f.state != "OUT_OF_MEMORY":
            text += (f" (Slurm recorded {f.state}, {humanize.slurm_exit(f.exit_code)}: its "
                     "memory enforcement kills a step that passes its request)")
        return text

    def _trainguard_code(self) -> str:
        """trainguard's own exit codes in words (its documented contract, trainguard/causes.py),
        when the run kept trainguard's records: a bare "exit 4" says nothing at 3 am."""
        code, _, _ = self.facts.exit_code.partition(":")
        if self.progress.step is None or not code.isdigit():
            return ""
        return TRAINGUARD_EXITS.get(int(code), "")

    def _timeout(self, after: str) -> str:
        f, p = self.facts, self.progress
        text = (f"hit its time limit of {humanize.limit(f.time_limit)}"
                if f.time_limit and f.time_limit < NO_LIMIT_S else f"hit its time limit{after}")
        if f.state == "DEADLINE":
            text = f"passed its deadline{after}"
        if p.step is not None:
            text += f" at step {humanize.count(p.step)}"
        if p.saved_step is not None:
            text += f", having saved at step {humanize.count(p.saved_step)}"
            if p.saved_at is not None and f.end is not None:
                text += f" {humanize.duration(f.end.timestamp() - p.saved_at)} before the end"
        return text

    def _node_fail(self, on: str) -> str:
        f = self.facts
        if f.state == "BOOT_FAIL":
            return f"could not start{on}: the node failed to boot (BOOT_FAIL)"
        where = ", ".join(n for n, _ in self.failed_nodes) or f.nodelist or "its node"
        reasons = "; ".join(f"{n}: {r!r}" for n, r in self.failed_nodes if r)
        text = f"was on {where} when the node failed (NODE_FAIL"
        if reasons:
            text += f"; drain reason {reasons}"
        elif f.nodelist and not self.failed_nodes:
            text += f"; {f.nodelist} is back in service now"
        return text + ")"

    def _by(self) -> str:
        f = self.facts
        if f.cancelled_by is None:
            return " (by whom: not recorded)" if f.source == "sacct" else ""
        role = None if f.by_owner is None else ("its owner" if f.by_owner else "not its owner")
        return f" by {f.cancelled_by}" + (f" ({role})" if role else "")

    def efficiency(self) -> str:
        """"CPU 87 % of 4 CPUs; peak memory 61.8 GiB of 64 GiB (97 %); 6 h 02 min of 24 h 00 min (25 %)"."""
        f = self.facts
        parts = []
        if f.total_cpu is not None and f.elapsed > 0 and f.ncpus:
            parts.append(f"CPU use {humanize.percent(f.total_cpu, f.elapsed * f.ncpus)} of "
                         f"{f.ncpus} CPU{'s' if f.ncpus > 1 else ''}")
        if f.max_rss is not None and f.mem_per_node:
            parts.append(f"peak memory {humanize.size(f.max_rss)} of {humanize.size(f.mem_per_node)} "
                         f"({humanize.percent(f.max_rss, f.mem_per_node)})")
        elif f.mem_per_node:
            parts.append(f"memory requested {humanize.size(f.mem_per_node)} (peak not recorded)")
        if f.time_limit and f.time_limit < NO_LIMIT_S:
            parts.append(f"elapsed {humanize.duration(f.elapsed)} of {humanize.limit(f.time_limit)} "
                         f"({humanize.percent(f.elapsed, f.time_limit)})")
        else:
            parts.append(f"elapsed {humanize.duration(f.elapsed)}")
        return "; ".join(parts)


def classify(facts: EndFacts) -> str:
    if not facts.source or not facts.state:
        return UNKNOWN
    if facts.memory_killed:
        return OUT_OF_MEMORY
    return _KINDS.get(facts.state, UNKNOWN)


def explain(facts: EndFacts, bad_nodes: dict[str, str], job_nodes: list[str],
            progress: Progress = Progress()) -> Ending:
    """`bad_nodes`: node -> reason for every node down or drained now (from sinfo)."""
    kind = classify(facts)
    failed = tuple((n, bad_nodes[n]) for n in job_nodes if n in bad_nodes) if kind == NODE_FAIL else ()
    return Ending(facts, kind, failed, progress)
