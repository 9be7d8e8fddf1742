"""`log_stale`: is the training hung?

Looks at a log file (or the newest match of a glob): its age, and optionally a progress
counter that must keep advancing; and/or at trainguard's per-rank heartbeat records and
hang log (a hang trainguard found from inside: which rank stopped first, where the others
are stuck, the hang report's path). Optionally (`hung_action`) it ends a job whose
heartbeat says `hung` and that has not left on its own within `hung_grace`.
Judged only while the linked `job` check's job runs: a queued job's log is quiet by design.
Every file access runs in a bounded child process (watchdogs.fsprobe), so a hung mount is
UNKNOWN "filesystem not responding", never a hung scheduler.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from watchdogs.checks.base import Check
from watchdogs.checks.job import WatchesLinkedJob
from watchdogs.config.options import Option, choice, duration, path, regex, size, string, timeout
from watchdogs.errors import SlurmError
from watchdogs.fsprobe.bounded import probe
from watchdogs.humanize import duration as format_duration
from watchdogs.result import CheckResult, Status, worst

if TYPE_CHECKING:
    # `validate` and `status` build this class for its option table only: what reads
    # heartbeats, hang logs and the job's state is imported by the methods that use it.
    from trainguard.heartbeat import Heartbeat
    from watchdogs.checks.context import TickContext
    from watchdogs.checks.recoveryrecord import Record
    from watchdogs.fsprobe.staleness import Verdict
    from watchdogs.slurmctl.jobstatus import Assessment

MEMORY = "check.log_stale"
ACTED = "check.log_stale.hung_action"
ACTIONS = ("none", "signal", "requeue")
EVENTS_TAIL = 64 * 1024


class LogStaleCheck(WatchesLinkedJob, Check):
    type_name = "log_stale"
    options: ClassVar[Mapping[str, Option]] = {
        "path": Option(path, help="the log file, or a glob whose newest match is watched"),
        "max_age": Option(duration, default=1800.0, help="older than this is hung"),
        "progress": Option(regex(groups=1), help="captures the iteration number, which must "
                                                 "advance within max_age"),
        "job": Option(string, help="the name of the `job` check of this training"),
        "heartbeats": Option(path, help="folder of trainguard heartbeat records"),
        "tail": Option(size, default=64 * 1024, help="how much of the log's end to search"),
        "probe_timeout": Option(timeout, default=15.0, help="a filesystem slower than this "
                                                            "is 'not responding'"),
        "hung_action": Option(choice(*ACTIONS), default="none",
                              help="when a heartbeat says hung for longer than hung_grace: "
                                   "none, signal (scancel --signal=USR1) or requeue"),
        "hung_grace": Option(duration, default=300.0, help="how long a hung job may take to "
                                                           "leave on its own before hung_action"),
    }
    references: ClassVar[Mapping[str, str]] = {"job": "job"}

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        if values.get("path") is None and values.get("heartbeats") is None:
            return [("path", "(missing)", "path (a log file or glob), heartbeats, or both")]
        if values.get("progress") is not None and values.get("path") is None:
            return [("progress", values["progress"].pattern, "a path whose log it is read from")]
        if values.get("hung_action", "none") != "none" and (values.get("heartbeats") is None
                                                            or values.get("job") is None):
            return [("hung_action", values["hung_action"], "none, unless heartbeats and job are set "
                                                           "(it acts on the linked job only)")]
        return []

    def run(self, ctx: TickContext) -> CheckResult:
        from watchdogs.slurmctl.jobstatus import RUNNING, UNKNOWN

        linked = self.linked_job(ctx)
        job = linked.assess(ctx) if linked is not None else None
        if linked is not None and job is not None and job.kind not in (RUNNING, UNKNOWN):
            return CheckResult(Status.OK, f"not judged while job check {linked.name!r} is "
                                          f"{job.kind} (a job that does not run writes nothing): "
                                          f"{job.summary}", context={"job_state": job.kind})
        since = _start(job)
        verdicts, log = [], None
        if self.opts.get("path") is not None:
            found, log = self._log(ctx, since)
            verdicts.extend(found)
        if self.opts.get("heartbeats") is not None:
            verdicts.extend(self._heartbeats(ctx, since, job))
        from watchdogs.checks.recovery import with_record

        # A restart in place changes no job state: the reader of a stale-log alert must see it.
        return with_record(self._combine(verdicts, job, log), lambda: self._record(ctx),
                           _running_id(job))

    def _record(self, ctx: TickContext) -> Record | None:
        """The run's recovery record: the linked job check's run folder, else the one beside
        this check's heartbeats folder (the templates keep both in one run folder)."""
        from watchdogs.checks.recovery import record_for, record_in

        linked = self.linked_job(ctx)
        found = record_for(linked, ctx) if linked is not None else None
        if found is None and self.opts.get("heartbeats") is not None:
            found = record_in(self.name, self.opts, ctx)
        return found

    def _combine(self, verdicts: list[Verdict], job: Assessment | None, log: str | None = None
                 ) -> CheckResult:
        from watchdogs.slurmctl.jobstatus import UNKNOWN

        status = worst([v.status for v in verdicts])
        bad = [v for v in verdicts if v.status is status] if status is not Status.OK else verdicts
        # "hung?" once at the front, not before each file's reason (issue 20 item 9).
        asks = any(v.summary.startswith("hung? ") for v in bad)
        # The job first (docs/alert-style.md: NAME (job ID)), when a bad verdict is about it.
        who = _job_words(job) if status is not Status.OK else ""
        summary = ("hung? " if asks else "") + who + "; ".join(v.summary.removeprefix("hung? ") for v in bad)
        details = tuple(d for v in verdicts for d in v.details)
        fingerprint = "|".join(sorted({v.fingerprint for v in verdicts if v.fingerprint}))
        context: dict[str, str] = {}
        if job is not None and job.kind == UNKNOWN and status is not Status.OK:
            # The log looks hung but Slurm cannot say whether the job still runs.
            return CheckResult(Status.UNKNOWN, f"{summary}; cannot tell whether the job runs: "
                                               f"{job.summary}", details, fingerprint=fingerprint)
        if job is not None and job.kind != UNKNOWN:
            context["job"] = job.context.get("job", "")
        if log is not None:
            context["log"] = log  # the file whose age is judged: `next:` tails it
        return CheckResult(status, summary, details, context=context, fingerprint=fingerprint)

    def _log(self, ctx: TickContext, since: float | None) -> tuple[list[Verdict], str | None]:
        """The verdicts on the newest matching log, and its path (None: no file matches)."""
        from watchdogs.fsprobe import staleness

        pattern = str(self.opts["path"])
        progress = self.opts.get("progress")
        found = probe("newest", {"pattern": pattern, "tail_bytes": self.opts["tail"] if progress else 0,
                                 "special": "report"},
                      self.opts["probe_timeout"], pattern)
        now, max_age = ctx.now.timestamp(), self.opts["max_age"]
        if found is None:
            return [_missing(pattern, now, max_age, since)], None
        if "kind" in found:
            return [_special(found["path"], found["kind"])], None
        verdicts = [staleness.file_age(found["path"], found["mtime"], now, max_age, since)]
        if progress is not None:
            verdicts.append(self._progress(ctx, found, since))
        return verdicts, str(found["path"])

    def _progress(self, ctx: TickContext, found: Mapping[str, Any], since: float | None
                  ) -> Verdict:
        from watchdogs.fsprobe import staleness

        now = ctx.now.timestamp()
        value = staleness.last_number(self.opts["progress"], found["tail"])
        if value is None:
            return staleness.Verdict(Status.OK, "no progress line yet")
        stored = ctx.store.kv_get(MEMORY, self.name)
        previous = staleness.Progress(**stored) if stored else None
        current = staleness.advance(previous, value, found["path"], now)
        ctx.store.kv_put(MEMORY, self.name, {"value": current.value, "changed_at": current.changed_at,
                                             "path": current.path})
        return staleness.judge_progress(previous, current, now, self.opts["max_age"], since)

    def _heartbeats(self, ctx: TickContext, since: float | None,
                    job: Assessment | None) -> list[Verdict]:
        from trainguard.heartbeat import Heartbeat
        from watchdogs.fsprobe import staleness

        folder = str(self.opts["heartbeats"])
        records = probe("heartbeats", {"directory": folder}, self.opts["probe_timeout"], folder)
        # A `hung` record or a problem older than this run's start is the previous run's.
        beats = [b for b in map(Heartbeat.from_dict, records)
                 if b.phase != "hung" or since is None or b.time >= since]
        problem = staleness.judge_problems([b for b in beats if since is None or b.time >= since])
        return [self._liveness(ctx, beats, since, job, folder), *([problem] if problem else [])]

    def _liveness(self, ctx: TickContext, beats: list[Heartbeat], since: float | None,
                  job: Assessment | None, folder: str) -> Verdict:
        from trainguard.hangs.record import EVENTS_FILE, parse_events
        from watchdogs.fsprobe import hangs, staleness

        now, job_id = ctx.now.timestamp(), _running_id(job)
        hung = hangs.hung_now(beats, now, job_id)
        log = probe("newest", {"pattern": str(Path(folder) / EVENTS_FILE), "tail_bytes": EVENTS_TAIL},
                    self.opts["probe_timeout"], folder)
        events = parse_events(log["tail"]) if log is not None else []
        if hung is not None and hangs.recent_hang(events, now, self.opts["max_age"]) is None:
            return self._act_on_hang(ctx, hung, beats, job_id, now)
        live = staleness.judge_heartbeats(beats, now, self.opts["max_age"], since)
        if hung is None and hangs.recent_hang(events, now, self.opts["max_age"]) is None:
            return live
        # A hang was logged: judged with what came after it (a restart in the recovery
        # record, heartbeats of a later run), so a recovery resolves the alert with its summary.
        record = self._record(ctx)
        after = hangs.Aftermath(tuple(record.entries) if record else (),
                                record.summary if record else "", tuple(beats))
        recent = hangs.recent_hang(events, now, self.opts["max_age"], after)
        if hung is not None:
            # The ranks' `hung` heartbeats outlive the exit (rank 0 wrote the event, then left):
            # while the logged hang is unresolved it is this hang, and its event says what
            # follows (the template decides); a resolved one was an earlier hang.
            chosen = recent if recent is not None and recent.status is Status.CRITICAL else hung
            return self._act_on_hang(ctx, chosen, beats, job_id, now)
        if recent is None or recent.status is not Status.OK or live.status is not Status.OK:
            return recent or live
        return replace(live, summary=f"{recent.summary}; {live.summary}")

    def _act_on_hang(self, ctx: TickContext, hung: Verdict, beats: list[Heartbeat],
                     job_id: str | None, now: float) -> Verdict:
        action = self.opts["hung_action"]
        since = min(b.time for b in beats if b.phase == "hung")
        if action == "none" or job_id is None or now - since < self.opts["hung_grace"]:
            return hung
        key = f"{self.name}:{job_id}:{since:.0f}"
        if ctx.store.kv_get(ACTED, key):
            return replace(hung, summary=f"{hung.summary}; {action} already sent")
        try:
            self._end_hung_job(ctx, action, job_id)
        except SlurmError as exc:
            return replace(hung, summary=f"{hung.summary}; {action} of job {job_id} failed: {exc}")
        ctx.store.kv_put(ACTED, key, {"action": action, "at": now})
        done = "sent USR1 to" if action == "signal" else "requeued"
        return replace(hung, summary=f"{hung.summary}; still running after "
                                     f"{format_duration(now - since)}: {done} job {job_id}")

    def _end_hung_job(self, ctx: TickContext, action: str, job_id: str) -> None:
        # The one side effect of this check, off by default: the training hung and did not
        # leave (a frozen rank holds the job). USR1 starts trainguard's forced exit; a
        # requeue ends every process of the job and queues it again.
        from watchdogs.slurmctl.snapshot import SLURM_TIMEOUT_S

        argv = (["scancel", "--signal=USR1", "--full", job_id] if action == "signal"
                else ["scontrol", "requeue", job_id])
        ctx.runner(argv, timeout=SLURM_TIMEOUT_S, env=ctx.slurm_env())


def _job_words(job: Assessment | None) -> str:
    """"my-train (job 36): " for the running job the verdicts are about; "" without one."""
    if job is None or not job.running:
        return ""
    name, job_id = job.context.get("job_name", ""), job.context.get("job", "")
    return f"{name} (job {job_id}): " if name else f"job {job_id}: "


def _running_id(job: Assessment | None) -> str | None:
    if job is not None and job.running:
        return job.running[0].raw_id
    return None


def _start(job: Assessment | None) -> float | None:
    if job is not None and job.running and job.running[0].start is not None:
        return job.running[0].start.timestamp()
    return None


def _special(path: str, kind: str) -> Verdict:
    """A FIFO, socket, directory or device where a log should be: a config problem, named
    for what it is (never read, so never a probe blocked into "not responding")."""
    from watchdogs.fsprobe import staleness

    return staleness.Verdict(Status.UNKNOWN, f"{path} is {kind}, not a log file: it has no age "
                                             "to judge (set path to the training's log file)",
                             fingerprint="special")


def _missing(pattern: str, now: float, max_age: float, since: float | None) -> Verdict:
    from watchdogs.fsprobe import staleness

    if since is not None and now - since > max_age:
        return staleness.Verdict(Status.CRITICAL, f"no file matches {pattern} although the job has "
                                                  f"run for longer than max_age", fingerprint="missing")
    if since is not None:
        return staleness.Verdict(Status.OK, f"no file matches {pattern} yet (the job just started)")
    return staleness.Verdict(Status.UNKNOWN, f"no file matches {pattern}")
