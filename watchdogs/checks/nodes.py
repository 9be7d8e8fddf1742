"""`nodes`: drained, draining, down and failing nodes, and the capacity left.

One `sinfo` per tick serves every `nodes` check. The fingerprint (the sorted names of the
bad nodes) lets the alert layer notify when the set of bad nodes changes, not every tick.
Nodes that went bad are recorded, so a node that keeps coming back bad is called out.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from watchdogs.checks.base import Check
from watchdogs.checks.job import WatchesLinkedJob
from watchdogs.config.options import Option, count, duration, integer, limit, string, string_list
from watchdogs.errors import SlurmError
from watchdogs.result import BadNode, CheckResult, Metric, NodesLook, Status
from watchdogs.slurmctl.hostlist import expand
from watchdogs.slurmctl.slurmtime import format_clock

if TYPE_CHECKING:
    # `validate` and `status` build this class for its option table only: Slurm's
    # modules are imported by the methods that ask Slurm.
    from watchdogs.checks.context import TickContext
    from watchdogs.slurmctl.sinfo import NodeRow

MEMORY = "check.nodes"
EVENTS_DDL = (
    "CREATE TABLE IF NOT EXISTS node_events (check_name TEXT NOT NULL, node TEXT NOT NULL,"
    " t REAL NOT NULL, state TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS node_events_by_node ON node_events (check_name, node, t)",
)


class NodesCheck(WatchesLinkedJob, Check):
    type_name = "nodes"
    # Same period as `job`: both land in the same tick, and one sinfo a tick (120 an hour)
    # serves every nodes check; a drained node is reported within a minute.
    common_defaults: ClassVar[Mapping[str, Any]] = {"every": 30.0}
    options: ClassVar[Mapping[str, Option]] = {
        "partition": Option(string_list, help="only nodes of these partitions (default: all)"),
        "job": Option(string, help="or only the nodes of the running job of this `job` check"),
        "reservation": Option(string, help="or only the nodes of this reservation"),
        "min_available": Option(limit(count), help='nodes (or "50%") that must stay usable; fewer: CRITICAL'),
        "flapping": Option(integer(2), default=3, help="went bad this often within "
                                                       "flapping_window: called out"),
        "flapping_window": Option(duration, default=7 * 86400.0, help="how far back flapping is counted"),
    }
    references: ClassVar[Mapping[str, str]] = {"job": "job"}

    def run(self, ctx: TickContext) -> CheckResult:
        from watchdogs.slurmctl.backoff import guarded
        from watchdogs.slurmctl.sinfo import run_sinfo
        from watchdogs.slurmctl.snapshot import SLURM_TIMEOUT_S

        try:
            rows = ctx.shared("sinfo", lambda: guarded(
                ctx.store, "sinfo", ctx.now.timestamp(),
                lambda: run_sinfo(SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner)))
        except SlurmError as exc:
            return CheckResult(Status.UNKNOWN, f"cannot ask Slurm about nodes: {exc}")
        scope = self._scope(ctx, rows)
        if isinstance(scope, CheckResult):
            return scope
        return self._judge(ctx, scope)

    def _scope(self, ctx: TickContext, rows: tuple[NodeRow, ...]) -> dict[str, NodeRow] | CheckResult:
        """Each node once (sinfo --Node repeats a node per partition)."""
        parts = self.opts.get("partition")
        wanted = self._wanted(ctx)
        if isinstance(wanted, CheckResult):
            return wanted
        nodes: dict[str, NodeRow] = {}
        for row in rows:
            if (parts and row.partition not in parts) or (wanted is not None and row.name not in wanted):
                continue
            nodes.setdefault(row.name, row)
        if not nodes:
            where = f"partition {', '.join(parts)}" if parts else "this cluster"
            return CheckResult(Status.UNKNOWN, f"no nodes in {where}")
        return nodes

    def _wanted(self, ctx: TickContext) -> set[str] | None | CheckResult:
        """The nodes of the linked job and/or reservation; None: no such restriction."""
        from watchdogs.slurmctl.backoff import guarded
        from watchdogs.slurmctl.jobstatus import UNKNOWN
        from watchdogs.slurmctl.sinfo import reservation_nodes
        from watchdogs.slurmctl.snapshot import SLURM_TIMEOUT_S

        wanted: set[str] | None = None
        linked = self.linked_job(ctx)
        if linked is not None:
            job = linked.assess(ctx)
            if job.kind == UNKNOWN:
                return CheckResult(job.status, job.summary)
            if not job.running:
                return CheckResult(Status.OK, f"job check {linked.name!r} has no running job: "
                                              "no nodes to watch")
            wanted = {n for r in job.running for n in expand(r.nodelist)}
        name = self.opts.get("reservation")
        if name is not None:
            try:
                found = ctx.shared(f"reservation:{name}", lambda: guarded(
                    ctx.store, "scontrol", ctx.now.timestamp(),
                    lambda: reservation_nodes(name, SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner)))
            except SlurmError as exc:
                return CheckResult(Status.UNKNOWN, f"cannot ask Slurm about reservation {name}: {exc}")
            wanted = (wanted or set()) | set(found)
        return wanted

    def _judge(self, ctx: TickContext, nodes: dict[str, NodeRow]) -> CheckResult:
        bad = sorted((r for r in nodes.values() if r.bad), key=lambda r: r.name)
        available = sum(r.available for r in nodes.values())
        idle = sum(r.idle for r in nodes.values())
        previous = set(ctx.store.kv_get(MEMORY, self.name, {}).get("bad", []))
        new = [r.name for r in bad if r.name not in previous]
        ctx.store.kv_put(MEMORY, self.name, {"bad": [r.name for r in bad]})
        repeats = self._record_events(ctx, [r for r in bad if r.name in new])
        status = Status.WARNING if bad else Status.OK
        minimum = self.opts.get("min_available")
        floor = minimum.resolve(len(nodes)) if minimum is not None else None
        capacity = _capacity(bad, available, idle, len(nodes))
        if floor is not None and available < floor:
            status = Status.CRITICAL
            capacity += f" (below min_available {floor:g})"
        lines = [_describe(r, ctx, r.name in new, repeats.get(r.name, 0), self.opts)
                 for r in bad]
        summary = "; ".join([*lines[:3], capacity]) if bad else f"all usable: {capacity}"
        if len(lines) > 3:
            summary = "; ".join([*lines[:3], f"and {len(lines) - 3} more", capacity])
        metrics = (Metric("bad", len(bad)), Metric("available", available, min="0", max=str(len(nodes))),
                   Metric("idle", idle))
        context = {"nodes": ",".join(r.name for r in bad)}
        if self.opts.get("partition"):
            context["partition"] = ",".join(self.opts["partition"])
        look = NodesLook(tuple(BadNode(r.name, r.base_state, r.reason or "") for r in bad), len(nodes))
        return CheckResult(status, summary, tuple(lines[3:]), metrics, context,
                           fingerprint=",".join(r.name for r in bad), look=look)

    def _record_events(self, ctx: TickContext, newly_bad: list[NodeRow]) -> dict[str, int]:
        """Record nodes that just went bad; how often each went bad within the window."""
        now, window = ctx.now.timestamp(), self.opts["flapping_window"]
        ctx.store.ensure_schema("checks.nodes", 1, EVENTS_DDL)
        with ctx.store.transaction() as db:
            db.executemany("INSERT INTO node_events VALUES (?, ?, ?, ?)",
                           [(self.name, r.name, now, r.base_state) for r in newly_bad])
            db.execute("DELETE FROM node_events WHERE check_name = ? AND t < ?", (self.name, now - window))
            found = db.execute("SELECT node, COUNT(*) FROM node_events WHERE check_name = ? AND t >= ? "
                               "GROUP BY node", (self.name, now - window)).fetchall()
        return {node: n for node, n in found}


def _capacity(bad: list[NodeRow], available: int, idle: int, total: int) -> str:
    kinds: dict[str, int] = {}
    for row in bad:
        kinds[row.base_state] = kinds.get(row.base_state, 0) + 1
    said = ", ".join(f"{n} {state}" for state, n in sorted(kinds.items()))
    head = f"{said} of {total}" if said else f"{total} nodes"
    return f"{head}; {available} usable, {idle} idle"


def _describe(row: NodeRow, ctx: TickContext, new: bool, went_bad: int, opts: Mapping[str, Any]) -> str:
    text = f"{row.name} {row.base_state}"
    if row.reason:
        text += f": {row.reason}"
    who = [x for x in (f"by {row.reason_user}" if row.reason_user else "",
                       f"since {format_clock(row.reason_time, ctx.now)}" if row.reason_time else "") if x]
    if who:
        text += f" ({' '.join(who)})"
    if new:
        text += " [new]"
    if went_bad >= opts["flapping"]:
        days = opts["flapping_window"] / 86400
        text += f" [went bad {went_bad} times in {days:g} days: keeps coming back bad]"
    return text

