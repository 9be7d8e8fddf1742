"""`log_stale`: is the training hung?

Looks at a log file (or the newest match of a glob): its age, and optionally a progress
counter that must keep advancing; and/or at trainguard's per-rank heartbeat records.
Judged only while the linked `job` check's job runs: a queued job's log is quiet by design.
Every file access runs in a bounded child process (watchdogs.fsprobe), so a hung mount is
UNKNOWN "filesystem not responding", never a hung scheduler.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from trainguard.heartbeat import Heartbeat
from watchdogs.checks.base import Check
from watchdogs.checks.context import TickContext
from watchdogs.checks.job import WatchesLinkedJob
from watchdogs.config.options import Option, duration, path, regex, size, string
from watchdogs.fsprobe import staleness
from watchdogs.fsprobe.bounded import probe
from watchdogs.result import CheckResult, Status, worst
from watchdogs.slurmctl.jobstatus import RUNNING, UNKNOWN, Assessment

MEMORY = "check.log_stale"


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
        "probe_timeout": Option(duration, default=15.0, help="a filesystem slower than this "
                                                            "is 'not responding'"),
    }
    references: ClassVar[Mapping[str, str]] = {"job": "job"}

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        if values.get("path") is None and values.get("heartbeats") is None:
            return [("path", "(missing)", "path (a log file or glob), heartbeats, or both")]
        if values.get("progress") is not None and values.get("path") is None:
            return [("progress", values["progress"].pattern, "a path whose log it is read from")]
        return []

    def run(self, ctx: TickContext) -> CheckResult:
        linked = self.linked_job(ctx)
        job = linked.assess(ctx) if linked is not None else None
        if job is not None and job.kind not in (RUNNING, UNKNOWN):
            return CheckResult(Status.OK, f"not judged while job check {linked.name!r} is "
                                          f"{job.kind} (a job that does not run writes nothing): "
                                          f"{job.summary}", context={"job_state": job.kind})
        since = _start(job)
        verdicts = []
        if self.opts.get("path") is not None:
            verdicts.extend(self._log(ctx, since))
        if self.opts.get("heartbeats") is not None:
            verdicts.append(self._heartbeats(ctx, since))
        return self._combine(verdicts, job)

    def _combine(self, verdicts: list[staleness.Verdict], job: Assessment | None) -> CheckResult:
        status = worst([v.status for v in verdicts])
        bad = [v for v in verdicts if v.status is status] if status is not Status.OK else verdicts
        summary = "; ".join(v.summary for v in bad)
        details = tuple(d for v in verdicts for d in v.details)
        fingerprint = "|".join(sorted({v.fingerprint for v in verdicts if v.fingerprint}))
        context: dict[str, str] = {}
        if job is not None and job.kind == UNKNOWN and status is not Status.OK:
            # The log looks hung but Slurm cannot say whether the job still runs.
            return CheckResult(Status.UNKNOWN, f"{summary}; cannot tell whether the job runs: "
                                               f"{job.summary}", details, fingerprint=fingerprint)
        if job is not None and job.kind != UNKNOWN:
            context["job"] = job.context.get("job", "")
        return CheckResult(status, summary, details, context=context, fingerprint=fingerprint)

    def _log(self, ctx: TickContext, since: float | None) -> list[staleness.Verdict]:
        pattern = str(self.opts["path"])
        progress = self.opts.get("progress")
        found = probe("newest", {"pattern": pattern, "tail_bytes": self.opts["tail"] if progress else 0},
                      self.opts["probe_timeout"], pattern)
        now, max_age = ctx.now.timestamp(), self.opts["max_age"]
        if found is None:
            return [_missing(pattern, now, max_age, since)]
        verdicts = [staleness.file_age(found["path"], found["mtime"], now, max_age, since)]
        if progress is not None:
            verdicts.append(self._progress(ctx, found, since))
        return verdicts

    def _progress(self, ctx: TickContext, found: Mapping[str, Any], since: float | None
                  ) -> staleness.Verdict:
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

    def _heartbeats(self, ctx: TickContext, since: float | None) -> staleness.Verdict:
        folder = str(self.opts["heartbeats"])
        records = probe("heartbeats", {"directory": folder}, self.opts["probe_timeout"], folder)
        beats = [Heartbeat(**r) for r in records]
        return staleness.judge_heartbeats(beats, ctx.now.timestamp(), self.opts["max_age"], since)


def _start(job: Assessment | None) -> float | None:
    if job is not None and job.running and job.running[0].start is not None:
        return job.running[0].start.timestamp()
    return None


def _missing(pattern: str, now: float, max_age: float, since: float | None) -> staleness.Verdict:
    if since is not None and now - since > max_age:
        return staleness.Verdict(Status.CRITICAL, f"no file matches {pattern} although the job has "
                                                  f"run for longer than max_age", fingerprint="missing")
    if since is not None:
        return staleness.Verdict(Status.OK, f"no file matches {pattern} yet (the job just started)")
    return staleness.Verdict(Status.UNKNOWN, f"no file matches {pattern}")
