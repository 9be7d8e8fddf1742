"""`training`: is it learning? trainguard's training-health findings, from its heartbeats.

trainguard measures inside the training (the loss, throughput, each rank's compute per
step, the data loader's share, the accelerator) and writes it into every rank's heartbeat
record (`trainguard.health.record`). This check reads those records (in a bounded child
process: a hung mount is UNKNOWN, never a hung scheduler) and raises what they say, with
the numbers and how long it has lasted:

  CRITICAL  loss NaN at step 12,345 (last finite 2.31 at step 12,300); stopped after step
            12,345, not requeued (exit 5); last good checkpoint step 12,000
  WARNING   rank 5 on node7 takes 1.9× the other ranks' median compute per step (...) for
            10 min; throughput 61 % of baseline
  OK        step 12,345, loss 2.31 (down from 2.52 1 h ago), 410 samples/s (98 % of baseline)

Records older than the linked job's start are a previous run's and are left out; with no
job linked (or the job gone) the newest records stand, so a run stopped by a NaN stays an
alert until a new run writes new records. The latest numbers are kept in the state store
for the metrics textfile (`watchdogs.scheduler.metrics`).
"""
from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from watchdogs.checks.base import Check
from watchdogs.checks.job import WatchesLinkedJob
from watchdogs.config.options import Option, duration, path, string, timeout
from watchdogs.fsprobe.bounded import probe
from watchdogs.humanize import duration as format_duration
from watchdogs.result import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.health.record import Finding, TrainingHealth
    from trainguard.heartbeat import Heartbeat
    from watchdogs.checks.context import TickContext

METRICS = "check.training.metrics"    # the latest numbers per check, for the textfile
TREND = "check.training.trend"        # (time, step, loss) readings, for "down from ... ago"
CRITICAL_KINDS = ("nan_loss",)
ORDER = ("nan_loss", "straggler", "throughput", "data_bound", "loss_spike", "idle_gpu")


class TrainingCheck(WatchesLinkedJob, Check):
    type_name = "training"
    options: ClassVar[Mapping[str, Option]] = {
        "heartbeats": Option(path, required=True, help="folder of trainguard heartbeat records "
                                                       "(TRAINGUARD_HEARTBEAT_DIR)"),
        "job": Option(string, help="the name of the `job` check of this training"),
        "trend": Option(duration, default=3600.0, help="how far back the loss trend looks"),
        "probe_timeout": Option(timeout, default=15.0, help="a filesystem slower than this "
                                                            "is 'not responding'"),
    }
    references: ClassVar[Mapping[str, str]] = {"job": "job"}

    def run(self, ctx: TickContext) -> CheckResult:
        linked = self.linked_job(ctx)
        job = linked.assess(ctx) if linked is not None else None
        since = (job.running[0].start.timestamp() if job is not None and job.running
                 and job.running[0].start is not None else None)
        folder = str(self.opts["heartbeats"])
        records = probe("heartbeats", {"directory": folder}, self.opts["probe_timeout"], folder)
        beats = [b for b in _parse(records) if b.health is not None and (since is None or b.time >= since)]
        now = ctx.now.timestamp()
        if not beats:
            ctx.store.kv_put(METRICS, self.name, {})
            return CheckResult(Status.OK, f"no training-health records in {folder} yet "
                                          "(trainguard writes them from its first heartbeat)")
        self._remember(ctx, beats, now)
        self._sample(ctx, beats, now)
        return judge(beats, now, self._trend(ctx, beats, now))

    def _sample(self, ctx: TickContext, beats: Sequence[Heartbeat], now: float) -> None:
        """One sample for the status page's curves, under the watched training's name (the
        linked job check's); a rank that says `hung` starts a `hung` event on its timeline."""
        from watchdogs.state import history

        lead = _lead(beats)
        health = lead.health
        assert health is not None
        item = self.opts.get("job") or self.name
        hung = [b for b in beats if b.phase == "hung"]
        history.ensure(ctx.store)
        with ctx.store.transaction() as db:
            if hung and history.last_phase(db, item) != "hung":
                beat = min(hung, key=lambda b: b.rank)
                history.add_events(db, [history.Event(
                    item, now, "hung", beat.job_id or None,
                    f"rank {beat.rank} on {beat.host or '?'} hung at step {beat.step:,}"
                    + (f" in {beat.frames[0]}" if beat.frames else ""))])
            history.add_sample(db, item, history.Sample(
                now, max(b.step for b in beats), health.rate if health.rate > 0 else None, health.unit,
                health.loss, health.checkpoint_step if health.checkpoint_step >= 0 else None,
                history.restarts(db, item, lead.job_id or None), "hung" if hung else lead.phase))

    def _remember(self, ctx: TickContext, beats: Sequence[Heartbeat], now: float) -> None:
        lead = _lead(beats)
        health = lead.health
        assert health is not None
        ctx.store.kv_put(METRICS, self.name, {
            "step": max(b.step for b in beats), "loss": health.loss, "nan": health.nan_step >= 0,
            "rate": health.rate, "unit": health.unit, "baseline": health.baseline,
            "checkpoint_step": health.checkpoint_step, "checkpoint_time": health.checkpoint_time,
            "heartbeat_time": max(b.time for b in beats), "time": now,
            "findings": sorted({f.kind for b in beats if b.health for f in b.health.findings})})

    def _trend(self, ctx: TickContext, beats: Sequence[Heartbeat], now: float) -> str:
        """'down from 2.52 1 h ago': the loss now against the oldest kept reading."""
        health = _lead(beats).health
        kept = [r for r in ctx.store.kv_get(TREND, self.name, []) if now - r[0] <= self.opts["trend"]]
        if health is None or health.loss is None:
            return ""
        if not kept or kept[-1][1] != health.loss_step:
            kept.append([now, health.loss_step, health.loss])
        ctx.store.kv_put(TREND, self.name, kept[-120:])
        then, _, old = kept[0]
        if now - then < 60 or old == health.loss:
            return ""
        way = "down" if health.loss < old else "up"
        return f"{way} from {old:.4g} {format_duration(now - then)} ago"


def _parse(records: Sequence[Mapping[str, Any]]) -> list[Heartbeat]:
    from trainguard.heartbeat import Heartbeat

    beats = []
    for record in records:
        try:
            beats.append(Heartbeat.from_dict(dict(record)))
        except (KeyError, TypeError, ValueError):
            continue   # one unreadable record is no reason to miss the others'
    return beats


def _lead(beats: Sequence[Heartbeat]) -> Heartbeat:
    """Rank 0's record (the one whose loss and checkpoint the user follows), else the lowest."""
    return min(beats, key=lambda b: b.rank)


def judge(beats: Sequence[Heartbeat], now: float, trend: str = "") -> CheckResult:
    """The findings of every rank, one line each (a straggler found by every rank once)."""
    found: dict[tuple[str, int], tuple[Heartbeat, Finding]] = {}
    for beat in beats:
        assert beat.health is not None
        for finding in beat.health.findings:
            key = (finding.kind, finding.rank if finding.rank >= 0 else beat.rank)
            found.setdefault(key, (beat, finding))
    lead = _lead(beats)
    if not found:
        return CheckResult(Status.OK, _summary(lead, beats, trend))
    ordered = sorted(found.items(), key=lambda kv: (ORDER.index(kv[0][0]) if kv[0][0] in ORDER else 99,
                                                    kv[0][1]))
    lines = [_line(beat, finding, beats, now) for (_, _), (beat, finding) in ordered]
    status = (Status.CRITICAL if any(kind in CRITICAL_KINDS for kind, _ in found) else Status.WARNING)
    fingerprint = "|".join(sorted(f"{kind}:rank{rank}" for kind, rank in found))
    details = tuple(lines[1:]) + (_summary(lead, beats, trend),)
    return CheckResult(status, lines[0] + (f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""),
                       details, fingerprint=fingerprint)


def _line(beat: Heartbeat, finding: Finding, beats: Sequence[Heartbeat], now: float) -> str:
    health = beat.health
    assert health is not None
    where = (f"rank {beat.rank} on {beat.host}: " if finding.rank < 0 and (len(beats) > 1 or beat.rank > 0)
             else "")
    lasted = format_duration(max(0.0, now - finding.since))
    if finding.kind == "nan_loss":
        action = health.action or "the policy lets the training go on"
        ckpt = (f"last good checkpoint step {health.checkpoint_step:,}" if health.checkpoint_step >= 0
                else "no checkpoint saved")
        return f"{where}{finding.text.replace('loss nan', 'loss NaN')}; {action}; {ckpt}"
    if finding.kind == "straggler":
        share = _throughput_share(beats)
        return f"{finding.text} for {lasted}" + (f"; throughput {share:.0%} of baseline" if share else "")
    return f"{where}{finding.text} (for {lasted})"


def _throughput_share(beats: Sequence[Heartbeat]) -> float:
    shares = [b.health.rate / b.health.baseline for b in beats if b.health and b.health.baseline > 0]
    return statistics.median(shares) if shares else 0.0


def _summary(lead: Heartbeat, beats: Sequence[Heartbeat], trend: str) -> str:
    health: TrainingHealth | None = lead.health
    assert health is not None
    parts = [f"step {max(b.step for b in beats):,}"]
    if health.nan_step >= 0:
        parts.append(f"loss {health.nan_value} at step {health.nan_step:,}")
    elif health.loss is not None:
        parts.append(f"loss {health.loss:.4g}" + (f" ({trend})" if trend else ""))
    if health.rate > 0:
        share = f" ({health.rate / health.baseline:.0%} of baseline)" if health.baseline > 0 else ""
        parts.append(f"{health.rate:.4g} {health.unit}/s{share}")
    computes = [b.health.compute_time for b in beats if b.health and b.health.compute_time > 0]
    if len(computes) > 1:
        parts.append(f"compute per step {min(computes):.3g}–{max(computes):.3g} s over {len(beats)} ranks")
    if health.checkpoint_step >= 0:
        parts.append(f"last checkpoint step {health.checkpoint_step:,}")
    return ", ".join(parts)
