"""`job`: is the training running or queued?

Every `job` check of a tick shares one squeue snapshot (watchdogs.slurmctl.snapshot). A
controller that cannot be asked gives UNKNOWN, never "job gone": an outage must not page
people that their training vanished.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from watchdogs.checks.base import Check
from watchdogs.checks.context import TickContext
from watchdogs.config.options import Option, duration, integer, path, regex, string, string_list
from watchdogs.errors import SlurmError, WatchdogsError
from watchdogs.result import CheckResult, Status
from watchdogs.slurmctl import resubmit
from watchdogs.slurmctl.jobinfo import LastState, last_state
from watchdogs.slurmctl.jobspec import JobSpec
from watchdogs.slurmctl.jobstatus import GONE, RUNNING, UNKNOWN, Assessment, assess, unknown
from watchdogs.slurmctl.snapshot import SLURM_TIMEOUT_S, JobSnapshot
from watchdogs.slurmctl.squeue import JobRow, latest_finished
from watchdogs.slurmctl.users import resolve_users

MEMORY = "check.job"
RESUBMITS = "check.job.resubmits"


class JobCheck(Check):
    type_name = "job"
    options: ClassVar[Mapping[str, Option]] = {
        "job_name": Option(string, help="the exact job name"),
        "job_regex": Option(regex(), help="or a regular expression the whole name matches"),
        "users": Option(string_list, help='user names, "@group" or "*"; default: the user '
                                          "running watchdogs"),
        "partition": Option(string_list, help="only jobs in these partitions"),
        "cluster": Option(string, help="the cluster to ask (squeue -M)"),
        "max_pending": Option(duration, help="warn when queued longer than this"),
        "resubmit": Option(path, help="batch script to sbatch when the job is gone"),
        "resubmit_limit": Option(integer(1), default=3, help="resubmits per resubmit_window"),
        "resubmit_window": Option(duration, default=6 * 3600.0),
        "kill_switch": Option(path, help="no resubmit while this file exists "
                                         "(default: NO_RESUBMIT beside the script)"),
    }

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        if (values.get("job_name") is None) == (values.get("job_regex") is None):
            return [("job_name", values.get("job_name") or "(missing)",
                     "exactly one of job_name or job_regex")]
        return []

    @property
    def spec(self) -> JobSpec:
        return JobSpec.from_options(self.opts)

    def watched_jobs(self, ctx: TickContext) -> list[JobSpec]:
        return [self.spec]

    def run(self, ctx: TickContext) -> CheckResult:
        verdict = self.assess(ctx)
        if verdict.kind == UNKNOWN:
            return CheckResult(verdict.status, verdict.summary)
        self._remember(ctx, verdict)
        if verdict.kind == GONE:
            return self._gone(ctx, verdict)
        return CheckResult(verdict.status, verdict.summary, verdict.details, verdict.metrics,
                           verdict.context, verdict.fingerprint)

    def assess(self, ctx: TickContext) -> Assessment:
        """The verdict from the tick's snapshot; kind UNKNOWN when Slurm cannot be asked
        (log_stale and nodes call this too, for the job they are linked to)."""
        spec = self.spec
        try:
            snapshot = ctx.job_snapshot(spec)
        except SlurmError as exc:
            return unknown(f"cannot ask Slurm about jobs with {spec.describe()}: "
                           f"{exc} (not assuming the job is gone)")
        if spec.users not in snapshot.users:
            resolve_users(spec.users)  # raises the reason (e.g. an unknown group) -> UNKNOWN
        memory = ctx.store.kv_get(MEMORY, self.name, {})
        return assess(snapshot.matching(spec), ctx.now, memory.get("last_running_at"),
                      self.opts.get("max_pending"))

    def _remember(self, ctx: TickContext, verdict: Assessment) -> None:
        """Last job ids seen alive (to ask how the last one ended) and when one last ran."""
        memory = dict(ctx.store.kv_get(MEMORY, self.name, {}))
        alive = [r.raw_id for r in (*verdict.running, *verdict.queued)]
        if alive:
            memory["job_ids"] = alive[-20:]
        if verdict.kind == RUNNING:
            memory["last_running_at"] = ctx.now.timestamp()
        ctx.store.kv_put(MEMORY, self.name, memory)

    def _gone(self, ctx: TickContext, verdict: Assessment) -> CheckResult:
        spec = self.spec
        last = self._last_state(ctx)
        summary = f"gone: no job with {spec.describe()} is running or queued; " + (
            last.describe(ctx.now) if last else "no record of how the last one ended")
        context = {"job_name": spec.job_name or spec.job_regex.pattern, "state": "GONE"}
        fingerprint = f"gone:{last.job_id if last else ''}"
        if last is not None:
            context.update(job=last.job_id, last_state=last.state, exit_code=last.exit_code)
        if self.opts.get("resubmit") is None:
            return CheckResult(Status.CRITICAL, summary, context=context, fingerprint=fingerprint)
        return self._resubmit(ctx, summary, context, last, fingerprint)

    def _last_state(self, ctx: TickContext) -> LastState | None:
        snapshot: JobSnapshot = ctx.job_snapshot(self.spec)
        row: JobRow | None = latest_finished(snapshot.matching(self.spec))
        remembered = ctx.store.kv_get(MEMORY, self.name, {}).get("job_ids") or []
        job_id = row.raw_id if row is not None else max(remembered, key=_numeric, default=None)
        if job_id is None:
            return None
        try:
            found = last_state(job_id, SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner)
        except SlurmError:
            found = None
        if found is None and row is not None:
            found = LastState(row.raw_id, row.state, "", row.reason, row.end, "squeue")
        return found

    def _resubmit(self, ctx: TickContext, summary: str, context: dict[str, str],
                  last: LastState | None, fingerprint: str) -> CheckResult:
        script = self.opts["resubmit"]
        policy = resubmit.ResubmitPolicy(script, self.opts["resubmit_limit"],
                                          self.opts["resubmit_window"],
                                          self.opts.get("kill_switch") or script.parent / "NO_RESUBMIT")
        now = ctx.now.timestamp()
        history = ctx.store.kv_get(RESUBMITS, self.name, [])
        decision = resubmit.decide(policy, history, now, policy.kill_switch.exists(),
                                   last.state if last else None)
        if not decision.allowed:
            return CheckResult(Status.CRITICAL, f"{summary}; {decision.why}", context=context,
                               fingerprint=fingerprint)
        try:
            job_id = self._submit(ctx, script)
        except SlurmError as exc:
            return CheckResult(Status.CRITICAL, f"{summary}; resubmit failed: {exc}", context=context,
                               fingerprint=fingerprint)
        ctx.store.kv_put(RESUBMITS, self.name, [*decision.recent, now])
        context["resubmitted"] = job_id
        return CheckResult(Status.WARNING, f"{summary}; resubmitted as job {job_id} "
                                           f"({decision.why.replace('resubmit ', '')})", context=context,
                           fingerprint=fingerprint)

    def _submit(self, ctx: TickContext, script: Path) -> str:
        # The one side effect of this check: sbatch the user's own script, as the user the
        # watchdog runs as, only after the decision above allowed it.
        return resubmit.submit(script, self.opts.get("job_name"), self.opts.get("cluster"),
                               SLURM_TIMEOUT_S, ctx.slurm_env(), ctx.runner)


def _numeric(job_id: str) -> int:
    """Job ids grow with time: the largest remembered one is the most recent instance."""
    return int(job_id) if job_id.isdigit() else 0


def linked_job_check(ctx: TickContext, name: str | None) -> JobCheck | None:
    """The `job` check called `name`: this tick's own instance when it is due now, else one
    made from the config, so a linked check can judge the job in a tick of its own."""
    if name is None:
        return None
    for check in ctx.checks:
        if check.name == name and isinstance(check, JobCheck):
            return check
    config = ctx.config.check(name) if ctx.config is not None else None
    if config is None or config.type != JobCheck.type_name:
        raise WatchdogsError(f"job: no `job` check named {name!r}")
    return JobCheck(config)


class WatchesLinkedJob:
    """For check types whose `job` key names a `job` check: that job joins the tick's one
    squeue snapshot."""

    opts: Mapping[str, Any]

    def linked_job(self, ctx: TickContext) -> JobCheck | None:
        return linked_job_check(ctx, self.opts.get("job"))

    def watched_jobs(self, ctx: TickContext) -> list[JobSpec]:
        linked = self.linked_job(ctx)
        return [linked.spec] if linked is not None else []
