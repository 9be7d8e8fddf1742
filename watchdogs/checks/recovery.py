"""A run's recovery record (trainguard.recovery, docs/suspect-nodes.md) in the `job`
check's words: which nodes are suspect and excluded, what was done last, a restart storm
with its history. In-place restarts change no job state, so they are told as notices (once
each; a template's own requeue too, with what it excluded), and a node Slurm drains under
the running job is recorded as its suspect.

The record lies in the run folder, often on NFS: it is read and written only by trainguard's
own CLI (`python -m trainguard.recovery dump|note|restart`) in a bounded child process, so a
dead mount makes the lines say "not readable", never a hung tick. Enabled by the check's
`run_dir` option, else by a recovery record beside the `heartbeats` folder (run_dir_of).
Reading it: watchdogs.checks.recoveryrecord.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdogs.checks.recoveryrecord import Record, cli, read_if_changed
from watchdogs.errors import SlurmError
from watchdogs.fsprobe.bounded import FsError, run_bounded
from watchdogs.result import CheckResult, Notice, Status

if TYPE_CHECKING:
    from watchdogs.checks.context import TickContext
    from watchdogs.checks.job import JobCheck
    from watchdogs.slurmctl.sinfo import NodeRow
    from watchdogs.slurmctl.squeue import JobRow

MEMORY = "check.job.recovery"
RESTARTED = "restarted"
TOLD = {"inplace": "restarted in place", "requeue": "requeued by its batch script"}
FIRST_LOOK_BACK_S = 3600.0   # restarts a first look still tells
KEEP_DRAINED = 50


def run_dir_of(opts: Mapping[str, Any]) -> tuple[Path | None, bool]:
    """The run folder of a check's options, and whether it was guessed: the `run_dir` key,
    else the parent of the `heartbeats` folder (the templates keep `heartbeat/` and
    `recovery/` in one run folder; it counts only when a recovery record is there)."""
    run_dir = opts.get("run_dir")
    if run_dir is not None:
        return Path(run_dir), False
    heartbeats = opts.get("heartbeats")
    return (Path(heartbeats).parent, True) if heartbeats is not None else (None, False)


def record_in(name: str, opts: Mapping[str, Any], ctx: TickContext) -> Record | None:
    """This tick's reading of the run folder of a check's options (read once per folder), or
    None without one."""
    run_dir, guessed = run_dir_of(opts)
    if run_dir is None:
        return None
    timeout = float(opts["probe_timeout"])
    return ctx.shared(f"recovery:{run_dir}",
                      lambda: read_if_changed(name, timeout, ctx, run_dir, found=guessed))


def record_for(check: JobCheck, ctx: TickContext) -> Record | None:
    """This tick's reading of the check's run folder (read once), or None without one."""
    return record_in(check.name, check.opts, ctx)


def lines(record: Record | None, job_id: str) -> list[str]:
    """What the alert about `job_id` says of the run's suspects and restarts."""
    if record is None:
        return []
    if record.error:
        return [f"suspect nodes and restarts: not readable ({record.error})"]
    out = []
    storm = record.storm(job_id)
    if storm is not None:
        out += [f"restart storm: {storm.get('reason', '?')}; the chain was ended on purpose "
                "(no requeue, no resubmission). The restarts:",
                *(f"  {line}" for line in storm.get("history", ()))]
    if record.summary:
        out.append(f"last recovery: {record.summary}")
    refused = record.refusal(job_id)
    if refused is not None:
        out.append(refusal_words(refused))
    if record.excluded:
        out.append("suspect nodes (excluded from the next start): "
                   + "; ".join(why for _node, why in record.excluded))
    if record.problems:
        out.append(f"recovery record: {len(record.problems)} unreadable line(s) left out, "
                   f"e.g. {record.problems[0]}")
    if record.policy_source:
        out.append(f"recovery policy: {record.policy_source}")
    return out


def with_record(result: CheckResult, record: Callable[[], Record | None], job_id: str | None
                ) -> CheckResult:
    """A linked check's alert (log_stale) with the run's recovery lines, as the `job` check's
    alerts show them; `record` is read only for an alert (a child process per read)."""
    if result.status is Status.OK or job_id is None:
        return result
    extra = lines(record(), job_id)
    return replace(result, details=(*result.details, *extra)) if extra else result


def refusal_words(e: Mapping[str, Any]) -> str:
    nodes = ",".join(map(str, e.get("nodes", ()))) or "?"
    return (f"the requeued run may land on {nodes} again: Slurm refused the exclusion "
            f"({e.get('reason', '?')})")


def notices(check: JobCheck, ctx: TickContext, rows: Sequence[JobRow]) -> list[Notice]:
    """In-place restarts since the last look, once each; drained nodes of the running job
    recorded as suspects; where the job runs remembered (for the resubmit's exclusion)."""
    record = record_for(check, ctx)
    if record is None:
        return []
    memory = dict(ctx.store.kv_get(MEMORY, check.name, {}))
    running = [r for r in rows if r.running]
    if running:
        memory["partition"], memory["num_nodes"] = running[-1].partition, running[-1].num_nodes
    memory["drained"] = _note_drained(check, ctx, running, memory.get("drained", []))
    told_until = float(memory.get("told_until", ctx.now.timestamp() - FIRST_LOOK_BACK_S))
    # Restarts by the templates (the watchdog's own resubmit says itself what it did).
    fresh = [e for e in record.entries if float(e.get("at", 0)) > told_until and (
             e.get("kind") == "exclusion_refused"
             or (e.get("kind") == "restart" and e.get("restart") in TOLD))]
    memory["told_until"] = max([told_until, *(float(e["at"]) for e in fresh)])
    ctx.store.kv_put(MEMORY, check.name, memory)
    return [Notice(f"{check.label()} (job {e.get('job', '?')}){_told(e)}", (), RESTARTED) for e in fresh]


def _told(e: Mapping[str, Any]) -> str:
    if e.get("kind") == "exclusion_refused":
        return f": {refusal_words(e)}"
    return f" {TOLD[str(e['restart'])]}: {e.get('summary') or e.get('text', '')}"


def _note_drained(check: JobCheck, ctx: TickContext, running: Sequence[JobRow],
                  noted: list[str]) -> list[str]:
    """Record each node Slurm drains under a running job once; the ids noted so far."""
    if not running:
        return noted
    from watchdogs.slurmctl.hostlist import expand

    drained = {r.name: r for r in _sinfo(ctx) if "drain" in r.base_state}
    for row in running:
        for node in expand(row.nodelist) if row.nodelist else []:
            key = f"{row.raw_id}:{node}"
            if node in drained and key not in noted and _note(check, row.raw_id, node, drained[node]):
                noted = [*noted, key][-KEEP_DRAINED:]
    return noted


def _sinfo(ctx: TickContext) -> tuple[NodeRow, ...]:
    # The tick's one sinfo, shared with the `nodes` checks and the job checks' endings.
    from watchdogs.slurmctl.backoff import guarded
    from watchdogs.slurmctl.sinfo import run_sinfo
    from watchdogs.slurmctl.snapshot import SLURM_TIMEOUT_S

    try:
        return ctx.shared("sinfo", lambda: guarded(
            ctx.store, "sinfo", ctx.now.timestamp(),
            lambda: run_sinfo(SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner)))
    except SlurmError:
        return ()


def _note(check: JobCheck, job_id: str, node: str, row: NodeRow) -> bool:
    # The one write of this module, by trainguard's own CLI in a bounded child.
    detail = f"drained while the job ran: {row.reason or row.state}"
    try:
        run_bounded(cli("note", "--policy-from-record", "--run-dir", str(run_dir_of(check.opts)[0]),
                         "--job", job_id, "--cause", "drained", "--nodes", node, "--detail", detail),
                    check.opts["probe_timeout"], f"recording suspect {node}")
    except FsError:
        return False   # tried again at the next look
    return True


def storm_reason(record: Record | None, job_id: str) -> str | None:
    storm = record.storm(job_id) if record is not None else None
    return None if storm is None else str(storm.get("reason", "restart storm"))


def exclusion(check: JobCheck, ctx: TickContext, failed: Sequence[str], need: int,
              row: JobRow | None) -> tuple[tuple[str, ...], str]:
    """The resubmit's `--exclude`: the failed nodes and the run's suspects, unless that
    leaves the job's partition too few usable nodes (from the tick's one sinfo)."""
    from watchdogs.slurmctl import resubmit

    record = record_for(check, ctx)
    suspects = record.excluded if record is not None else ()
    memory = ctx.store.kv_get(MEMORY, check.name, {})
    partition = row.partition if row is not None and row.partition else memory.get("partition")
    need = need or int(memory.get("num_nodes") or 1)
    rows = _sinfo(ctx) if partition and suspects else ()
    named = set(str(partition).split(","))
    mine = [r for r in rows if r.partition.rstrip("*") in named]
    # No row of the partition (sinfo failed, or no partition known): its size is unknown.
    usable = sorted({r.name for r in mine if r.available}) if mine else None
    return resubmit.exclusion(failed, suspects, usable, need)


def would_storm(check: JobCheck, ctx: TickContext, job_id: str, cause: str, node: str
                ) -> tuple[str, list[str]] | None:
    """The restart storm a resubmit now would make (trainguard's rule, by the policy the job
    ran with, from its record: not this environment's), judged before sbatch: its reason and
    one line per restart; None when none, or when the record cannot be read (the policy's own
    crash-loop limit still holds)."""
    from trainguard.recovery.policy import recorded
    from trainguard.recovery.restarts import Restart, storm

    record = record_for(check, ctx)
    if record is None or record.error:
        return None
    try:
        policy = recorded(record.entries).storm
        history = [Restart(float(e["at"]), str(e["job"]), str(e["restart"]), str(e.get("cause", "")),
                           str(e.get("node", "")), int(e.get("step", -1)))
                   for e in record.entries if e.get("kind") == "restart"]
    except (KeyError, TypeError, ValueError):
        return None
    now = ctx.now.timestamp()
    found = storm([*history, Restart(now, job_id, "resubmit", cause, node)], now, policy)
    return None if found is None else (found.reason, [f"  {line}" for line in found.lines()])


def count_restart(check: JobCheck, ctx: TickContext, job_id: str, cause: str, node: str,
                  excluded: Sequence[str]) -> None:
    """Record the resubmission in the run's record, after sbatch. A record that cannot be
    written does not undo it (the alert says the job was resubmitted)."""
    run_dir, guessed = run_dir_of(check.opts)
    if run_dir is None or (guessed and record_for(check, ctx) is None):
        return
    with contextlib.suppress(FsError):
        run_bounded(cli("restart", "--policy-from-record", "--run-dir", str(run_dir), "--job", job_id,
                         "--kind", "resubmit",
                         "--cause", cause, "--excluded", ",".join(excluded),
                         *(["--node", node] if node else [])),
                    check.opts["probe_timeout"], f"recording the resubmit in {run_dir}")
