"""`job`: is the training running or queued? And when it is gone: why, in words, and what
was done about it (watchdogs.checks.jobgone).

Every `job` check of a tick shares one squeue snapshot (watchdogs.slurmctl.snapshot) and
one sacct call (watchdogs.checks.jobend). A controller that cannot be asked gives UNKNOWN,
never "job gone": an outage must not page people that their training vanished.

`validate` and `status` build this class for its option table and never run it, so the
modules that read the queue and explain an ending are imported by the methods that use
them (tests/foundation/test_cli_imports.py pins what those commands load).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from watchdogs.checks import jobnotices
from watchdogs.checks.base import Check
from watchdogs.config.options import (
    Option,
    duration,
    integer,
    path,
    regex,
    string,
    string_list,
    subset_of,
    timeout,
)
from watchdogs.config.paths import FILE_TRUSTED
from watchdogs.errors import SlurmError, WatchdogsError
from watchdogs.result import CheckResult, JobLook, Notice
from watchdogs.slurmctl import resubmit

if TYPE_CHECKING:
    from watchdogs.checks.context import TickContext
    from watchdogs.checks.jobend import Window
    from watchdogs.slurmctl.jobspec import JobSpec
    from watchdogs.slurmctl.jobstatus import Assessment
    from watchdogs.slurmctl.squeue import JobRow

MEMORY = "check.job"
# A first look that finds nothing asks accounting this far back for the last run.
FIRST_LOOKBACK_S = 24 * 3600.0
# Accounting's times come from slurmctld's clock; a little overlap costs nothing.
CLOCK_MARGIN_S = 60.0


class JobCheck(Check):
    type_name = "job"
    # A vanished job is reported within a minute: every 30s, plus the tick at worst
    # (benchmarks/detection.py). Every job check shares one squeue a tick, so the
    # controller sees 120 squeue calls an hour, however many jobs are watched.
    common_defaults: ClassVar[Mapping[str, Any]] = {"every": 30.0}
    options: ClassVar[Mapping[str, Option]] = {
        "job_name": Option(string, help="the exact job name"),
        "job_regex": Option(regex(), help="or a regular expression the whole name matches"),
        "users": Option(string_list, help='user names, "@group" or "*"; default: the user '
                                          "running watchdogs"),
        "partition": Option(string_list, help="only jobs in these partitions"),
        "cluster": Option(string, help="the cluster to ask (squeue -M)"),
        "max_pending": Option(duration, help="warn when queued longer than this"),
        "resubmit": Option(path, help="batch script to sbatch when the job is gone",
                           exists=FILE_TRUSTED),
        "resubmit_limit": Option(integer(1), default=3, help="resubmits per resubmit_window"),
        "resubmit_window": Option(duration, default=6 * 3600.0),
        "resubmit_on": Option(subset_of(*resubmit.ENDINGS), default=resubmit.DEFAULT_RESUBMIT_ON,
                              help="the endings after which to resubmit (see the policy table)"),
        "fail_fast": Option(duration, default=resubmit.DEFAULT_FAIL_FAST,
                            help="a failure this soon after the start is not resubmitted"),
        "kill_switch": Option(path, help="no resubmit while this file exists "
                                         "(default: NO_RESUBMIT beside the script)"),
        "output": Option(string, help="the job's stdout pattern as given to sbatch (%j, %x, ...)"),
        "error": Option(string, help="the job's stderr pattern, when separate"),
        "tail_lines": Option(integer(0, 200), default=20, help="log lines in the alert (0: none)"),
        "heartbeats": Option(path, help="trainguard's heartbeat folder (the step reached)"),
        "checkpoints": Option(path, help="trainguard's checkpoint folder (the step saved)"),
        "notices": Option(subset_of(*jobnotices.KINDS), default=(),
                          help="lifecycle notices to send: started, requeued, ended"),
        "run_dir": Option(path, help="the training's run folder: its suspect nodes and restarts "
                                     "in the alert, excluded on resubmit (docs/suspect-nodes.md); "
                                     "default: the heartbeats folder's parent when it holds a "
                                     "recovery record"),
        "probe_timeout": Option(timeout, default=10.0, help="reading logs and checkpoints"),
    }

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        if (values.get("job_name") is None) == (values.get("job_regex") is None):
            return [("job_name", values.get("job_name") or "(missing)",
                     "exactly one of job_name or job_regex")]
        return []

    @functools.cached_property
    def spec(self) -> JobSpec:
        # Asked several times per check per tick; a check's options are fixed for its life.
        from watchdogs.slurmctl.jobspec import JobSpec

        return JobSpec.from_options(self.opts)

    def watched_jobs(self, ctx: TickContext) -> list[JobSpec]:
        return [self.spec]

    # -- what a look remembers for the next one -------------------------------------------
    # One record per check in the state store, read and written by the check's lifecycle
    # notices (watchdogs.checks.joblifecycle) and by the explanation of a gone job
    # (watchdogs.checks.jobgone) through these two methods, so they need nothing of this
    # module but the check they are handed: they depend on it, it does not depend on them.

    def memory(self, ctx: TickContext) -> dict[str, Any]:
        """This check's memory of its earlier looks: a copy, changed and given back to
        `keep_memory`."""
        return dict(ctx.store.kv_get(MEMORY, self.name, {}))

    def keep_memory(self, ctx: TickContext, memory: Mapping[str, Any]) -> None:
        ctx.store.kv_put(MEMORY, self.name, memory)

    def ended_job_ids(self, ctx: TickContext) -> list[str]:
        """The job IDs this check needs accounting for this tick, computed once per tick
        (before the check updates its memory): jobs seen alive last time and gone now, and
        the last instance when none is alive."""
        return ctx.shared(f"job-ended:{self.name}", lambda: self._ended_ids(ctx))

    def _ended_ids(self, ctx: TickContext) -> list[str]:
        rows = self._rows(ctx)
        memory = self.memory(ctx)
        alive = {r.raw_id for r in rows if r.running or r.queued}
        ids: list[str] = []
        if jobnotices.ENDED in (self.opts.get("notices") or ()):
            ids += [i for i in memory.get("seen", {}) if i not in alive]
            ids += [i for i in memory.get("pending_notices", {}) if i not in ids]
        last = None if alive else self.last_id(rows, memory)
        if last is not None and last not in ids:
            ids.append(last)
        return [i for i in ids if i not in memory.get("explained", {})]

    def accounting_window(self, ctx: TickContext) -> Window | None:
        """What this check needs from the tick's one sacct, as a time window over its job's
        name and users: while no run is alive, every run since the last look that saw one
        alive (or since the last look, once that gap was asked about), so a run that started
        and ended between two looks and that the controller forgot (MinJobAge) is found; and
        the runs it saw alive whose end it must explain (`ended_job_ids`). None: nothing."""
        return ctx.shared(f"job-window:{self.name}", lambda: self._window(ctx))

    def _window(self, ctx: TickContext) -> Window | None:
        from watchdogs.checks.jobend import Window

        rows = self._rows(ctx)
        memory = self.memory(ctx)
        first = ctx.now.timestamp() - FIRST_LOOKBACK_S
        ids = self.ended_job_ids(ctx)
        alive = any(r.running or r.queued for r in rows)
        # Requeues are told from accounting's records of earlier runs, not from what one look
        # happens to see (a run that started and was requeued between two looks).
        requeues = jobnotices.REQUEUED in (self.opts.get("notices") or ()) and "seen" in memory
        if alive and not ids and not requeues:
            return None
        since = float("inf")
        if not alive:
            last: float | None = memory.get("alive_at" if memory.get("alive_last") else "looked_at")
            since = first if last is None else last
        if requeues:
            since = min(since, memory.get("looked_at", first))
        if ids:
            # Jobs seen alive at the last look (or ended-notices still waiting for accounting,
            # alive one period before they were first seen gone) ended after this.
            waiting = memory.get("pending_notices", {}).values()
            since = min(since, memory.get("looked_at", first),
                        min(waiting, default=float("inf")) - self.config.every)
        spec = self.spec
        return Window(since - CLOCK_MARGIN_S, (spec.job_name,) if spec.job_name else None,
                      ctx.job_snapshot(spec).users.get(spec.users))

    def _rows(self, ctx: TickContext) -> list[JobRow]:
        return ctx.job_snapshot(self.spec).matching(self.spec)

    def run(self, ctx: TickContext) -> CheckResult:
        from watchdogs.checks import joblifecycle as lifecycle
        from watchdogs.slurmctl.jobstatus import GONE, UNKNOWN

        verdict = self.assess(ctx)
        if verdict.kind == UNKNOWN:
            return CheckResult(verdict.status, verdict.summary)
        # Fixed for this tick before the memory below moves on (the snapshot answered just
        # above, so nothing here can fail usefully).
        with contextlib.suppress(WatchdogsError):
            self.ended_job_ids(ctx)
            self.accounting_window(ctx)
        rows = self._rows(ctx)
        self._remember_outputs(ctx)
        causes = lifecycle.requeue_causes(self, ctx, rows)
        said = self._notices(ctx, rows, causes)
        last = (self.memory(ctx).get("job_ids") or [None])[-1]
        lifecycle.remember(self, ctx, verdict, rows)
        result = (self._gone(ctx, rows) if verdict.kind == GONE else
                  CheckResult(verdict.status, verdict.summary, verdict.details, verdict.metrics,
                              verdict.context, verdict.fingerprint))
        # A gone look carries the run its summary explains (jobgone's `job`: the newest run in
        # accounting), not the last one seen alive: the page shows the two side by side.
        look = _look(verdict, result.context.get("job") or last, result.summary)
        result = dataclasses.replace(result, look=dataclasses.replace(
            look, requeue_cause=causes.get(look.job_id or "", "")))
        if not said:
            return result
        # The lifecycle's own `ended` notice already tells a completion.
        own = () if any(n.kind == jobnotices.ENDED for n in said) else result.notices
        return dataclasses.replace(result, notices=(*said, *own))

    # -- where the job's logs are, asked of Slurm while it knows the job (jobfiles) --------

    def new_output_ids(self, ctx: TickContext) -> list[str]:
        """Alive jobs whose stdout/stderr paths this check has not asked Slurm for yet (none
        when the check's own keys name them, no tail is wanted, or another cluster is asked)."""
        from watchdogs.checks.jobfiles import new_output_ids

        opts = self.opts
        if opts["tail_lines"] <= 0 or opts.get("cluster") or opts.get("output") or opts.get("error"):
            return []
        return ctx.shared(f"job-new-outputs:{self.name}",
                          lambda: new_output_ids(self.memory(ctx), self._rows(ctx)))

    def _remember_outputs(self, ctx: TickContext) -> None:
        """Keep Slurm's paths of this check's new jobs for when they are gone (one squeue for
        every job check of the tick); a failed call is tried again at the next look."""
        from watchdogs.checks.jobfiles import kept_outputs, tick_outputs

        ids = self.new_output_ids(ctx)
        if not ids:
            return
        try:
            asked, found = tick_outputs(ctx)
        except WatchdogsError:
            return
        mine = [i for i in ids if i in asked]
        if mine:
            memory = self.memory(ctx)
            memory["outputs"] = kept_outputs(memory, found, mine)
            self.keep_memory(ctx, memory)

    def assess(self, ctx: TickContext) -> Assessment:
        """The verdict from the tick's snapshot; kind UNKNOWN when Slurm cannot be asked
        (log_stale and nodes call this too, for the job they are linked to)."""
        from watchdogs.slurmctl.jobstatus import assess, unknown
        from watchdogs.slurmctl.users import (
            NOT_KNOWN_WHY,
            UnknownUser,
            invalid_user_in,
            not_known,
            resolve_users,
        )

        spec = self.spec
        # No word here may say the job ended: a cut subject or an SMS shows only its start.
        try:
            snapshot = ctx.job_snapshot(spec)
        except SlurmError as exc:
            unknown_user = invalid_user_in(str(exc))
            if unknown_user is not None:
                return unknown(f"{not_known(unknown_user)}: cannot tell whether "
                               f"jobs with {spec.describe()} run (squeue: {exc})")
            return unknown(f"cannot tell whether jobs with {spec.describe()} run: "
                           f"{exc} (the job is not reported as stopped until Slurm answers cleanly)")
        if spec.users not in snapshot.users:
            try:
                resolve_users(spec.users)
            except UnknownUser as exc:
                return unknown(f"{not_known(exc.name)}: cannot tell whether jobs with "
                               f"{spec.describe()} run ({NOT_KNOWN_WHY}; fix `users` in check "
                               f"{self.name!r})")
            except WatchdogsError as exc:
                return unknown(f"cannot tell whether jobs with {spec.describe()} run: {exc}")
        memory = self.memory(ctx)
        return assess(snapshot.matching(spec), ctx.now, memory.get("last_running_at"),
                      self.opts.get("max_pending"))

    # -- lifecycle notices (watchdogs.checks.joblifecycle) --------------------------------

    def _notices(self, ctx: TickContext, rows: list[JobRow], causes: dict[str, str]) -> list[Notice]:
        from watchdogs.checks.joblifecycle import lifecycle_notices
        from watchdogs.checks.recovery import notices

        return [*lifecycle_notices(self, ctx, rows, causes), *notices(self, ctx, rows)]

    # -- the job is gone: why, and what to do (watchdogs.checks.jobgone) ------------------

    def label(self) -> str:
        spec = self.spec
        return spec.job_name or (spec.job_regex.pattern if spec.job_regex else "")

    @staticmethod
    def last_id(rows: list[JobRow], memory: Mapping[str, Any]) -> str | None:
        from watchdogs.slurmctl.squeue import latest_finished

        row = latest_finished(rows)
        if row is not None:
            return row.raw_id
        remembered = memory.get("job_ids") or []
        return max(remembered, key=_numeric, default=None)

    def _gone(self, ctx: TickContext, rows: list[JobRow]) -> CheckResult:
        from watchdogs.checks.jobgone import gone

        return gone(self, ctx, rows)


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


def _look(verdict: Assessment, last_id: str | None, summary: str) -> JobLook:
    """This look for the report's timeline (watchdogs.scheduler.story)."""
    row = (verdict.running or verdict.queued or (None,))[0]
    if row is None:
        return JobLook(verdict.kind, last_id, None, summary)
    return JobLook(verdict.kind, row.raw_id, row.start.timestamp() if row.running and row.start else None,
                   "" if row.running else row.reason)
