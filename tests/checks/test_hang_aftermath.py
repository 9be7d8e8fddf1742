"""A logged hang is judged with what came after it (issue 36, hang and recovery): a restart
in the run's recovery record, or heartbeats of a later run, resolve the hang alert with the
recovery's own summary line; while nothing has, the alert says that the template decides,
without promising a restart in place or a requeue; a restart storm keeps it CRITICAL.

Pure tests of watchdogs.fsprobe.hangs over recorded hang events and record entries, then
the `log_stale` check over a real hang log and a real recovery record written by
trainguard's own CLI, found beside the heartbeats folder (no `run_dir` key). No Slurm."""
from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from tests.checks.conftest import tick, write_config
from tests.checks.test_job_endings_cluster import plain
from tests.checks.test_log_stale_hang import event
from tests.checks.test_recovery_alerts import mail
from tests.helpers import wait_for
from tests.notifiers.fakes import SmtpServer
from trainguard.hangs.record import HangEvent, append_event
from trainguard.heartbeat import Heartbeat, write_heartbeat
from watchdogs.alerts import build_sink
from watchdogs.fsprobe.hangs import Aftermath, next_words, recent_hang
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

HUNG_AT = 1_800_000_000.0
SUMMARY = ("node2 stopped the run at step 64 (rank 1, in all_reduce); node2 excluded; training "
           "resumed at 03:07 on node1,node3 from step 49, 0.6 s after the fault; 0 spares left")
PLAN = {"kind": "plan", "at": HUNG_AT - 600, "job": "77", "use": ["node1", "node2"],
        "spares_left": 1, "enough": True}


def restart(at: float, kind: str = "inplace", job: str = "77", summary: str = SUMMARY) -> dict[str, object]:
    return {"kind": "restart", "at": at, "job": job, "restart": kind, "cause": "hang",
            "node": "node2", "step": 49, "summary": summary}


def hung(action: str = "exiting 140 (requeue) in 5 s") -> list[HangEvent]:
    return [event(HUNG_AT, restart=0, step=64, action=action),
            event(HUNG_AT + 1, restart=0, rank=1, step=64, action=action)]


def test_a_hang_still_recovering_says_the_template_decides_with_the_spares_left() -> None:
    verdict = recent_hang(hung(), HUNG_AT + 30, 1800, Aftermath((PLAN,)))
    assert verdict is not None and verdict.status is Status.CRITICAL
    assert verdict.summary.startswith("training hung at step 64 (job 77, restart 0); ")
    assert "trainguard ends the run (exit 140); the template decides: restart in place " \
           "(1 spare left) or requeue; restarts from step 41000" in verdict.summary
    assert "exiting 140 (requeue)" not in verdict.summary  # no promise of a requeue


def test_without_a_plan_the_words_promise_neither_and_other_actions_stand() -> None:
    assert next_words("exiting 140 (requeue) in 5 s", None) == \
        "trainguard ends the run (exit 140); the template decides: restart in place or requeue"
    # trainguard's reworded exit (no promise either) is read the same way.
    assert next_words("exiting 140 in 1 s: the batch script decides", 0).endswith(
        "restart in place (0 spares left) or requeue")
    assert next_words("exiting 141 (no requeue) in 5 s", 1) == "exiting 141 (no requeue) in 5 s"
    assert next_words("policy: report only, training continues to wait", 1) == \
        "policy: report only, training continues to wait"


def test_an_in_place_restart_after_the_hang_resolves_it_with_the_recovery_summary() -> None:
    after = Aftermath((PLAN, restart(HUNG_AT + 8)), SUMMARY)
    verdict = recent_hang(hung(), HUNG_AT + 60, 1800, after)
    assert verdict is not None and verdict.status is Status.OK
    assert verdict.summary == f"recovered from the hang at step 64 (job 77, restart 0): {SUMMARY}"


def test_a_requeue_or_a_resubmission_as_a_newer_job_resolves_it_too() -> None:
    requeued = ("node2 stopped the run at step 64; node2 excluded; job 77 requeued at 03:07, "
                "to resume from step 49")
    by_template = Aftermath((restart(HUNG_AT + 5, "requeue", summary=requeued),))
    verdict = recent_hang(hung(), HUNG_AT + 60, 1800, by_template)
    assert verdict is not None and verdict.status is Status.OK and verdict.summary.endswith(requeued)
    resubmitted = Aftermath((restart(HUNG_AT + 90, "resubmit", job="78", summary="job 78 resubmitted"),))
    verdict = recent_hang(hung(), HUNG_AT + 120, 1800, resubmitted)
    assert verdict is not None and verdict.status is Status.OK
    assert verdict.summary.endswith("job 78 resubmitted")


def test_a_restart_before_the_hang_or_of_another_chain_does_not_resolve_it() -> None:
    earlier = Aftermath((restart(HUNG_AT - 900), restart(HUNG_AT + 5, job="12")))
    verdict = recent_hang(hung(), HUNG_AT + 60, 1800, earlier)
    assert verdict is not None and verdict.status is Status.CRITICAL


def test_a_restart_storm_after_the_hang_keeps_it_critical_and_says_the_chain_ended() -> None:
    storm = {"kind": "storm", "at": HUNG_AT + 9, "job": "77", "reason": "3 restarts in 1 h"}
    verdict = recent_hang(hung(), HUNG_AT + 60, 1800, Aftermath((restart(HUNG_AT + 9), storm)))
    assert verdict is not None and verdict.status is Status.CRITICAL
    assert verdict.summary == ("training hung at step 64 (job 77, restart 0); restart storm: 3 restarts "
                               "in 1 h; the chain was ended on purpose (no requeue, no resubmission)")


def test_heartbeats_of_a_later_run_resolve_it_without_a_record() -> None:
    def beat(step: int, restart: int, phase: str = "train", job: str = "77") -> Heartbeat:
        return Heartbeat(0, step, phase, HUNG_AT + 40, job_id=job, restart=restart)

    for later in (beat(41010, 1), beat(65, 0), beat(10, -1, job="78")):
        verdict = recent_hang(hung(), HUNG_AT + 60, 1800, Aftermath(beats=(later,)))
        assert verdict is not None and verdict.status is Status.OK, later
        assert " trains again: rank 0 at step " in verdict.summary
    for same_run in (beat(64, 0), beat(41010, 1, phase="hung"), beat(63, -1)):
        verdict = recent_hang(hung(), HUNG_AT + 60, 1800, Aftermath(beats=(same_run,)))
        assert verdict is not None and verdict.status is Status.CRITICAL, same_run


def recovery(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "trainguard.recovery", *args], check=True,
                   capture_output=True, timeout=60)


def test_log_stale_resolves_a_hang_with_the_summary_from_the_record_beside_the_heartbeats(
        tmp_path: Path) -> None:
    """The templates keep heartbeat/ and recovery/ in one run folder: no run_dir key needed.
    The alert mail says the template decides; the RESOLVED mail carries the summary line."""
    run, now = tmp_path / "run", time.time()
    beats = run / "heartbeat"
    beats.mkdir(parents=True)
    recovery("plan", "--run-dir", str(run), "--allocation", "node[1-3]", "--need", "2", "--job", "77")
    append_event(beats, event(now - 60, restart=0, step=64, checkpoint=49))
    write_heartbeat(beats, 0, 64, "train", now=now - 400, job_id="77")
    checks = (f'[[check]]\nname = "hung"\ntype = "log_stale"\nheartbeats = "{beats}"\n'
              'max_age = "30m"\n')
    with SmtpServer() as smtp:
        config = write_config(tmp_path, checks + mail(smtp.port))
        store = StateStore(config.scheduler.state_dir)
        sink = build_sink(config, store)

        def look(at: float) -> CheckResult:
            results, ctx = tick(config, store, now=datetime.fromtimestamp(at).astimezone())
            sink.handle([ItemOutcome("hung", "check", results["hung"], ctx.now, ctx.now)], ctx.now)
            sink.flush(ctx.now)
            return results["hung"]
        try:
            first = look(now)
            assert first.status is Status.CRITICAL, first
            wait_for(lambda: len(smtp.received) == 1, what="the hang alert")
            # The template restarts in place: its record, then the restarted run's heartbeats.
            recovery("note", "--run-dir", str(run), "--job", "77", "--cause", "hang", "--nodes", "node2",
                     "--step", "64", "--detail", "rank 1, in all_reduce")
            recovery("restart", "--run-dir", str(run), "--job", "77", "--kind", "inplace", "--cause",
                     "hang", "--node", "node2", "--step", "49")
            summary = (run / "recovery" / "summary.txt").read_text().strip()
            assert summary.startswith("node2 stopped the run at step 64")
            write_heartbeat(beats, 0, 52, "train", now=time.time(), job_id="77")
            resolved = look(time.time() + 5)
            wait_for(lambda: len(smtp.received) == 2, what="the RESOLVED mail")
        finally:
            store.close()
    assert resolved.status is Status.OK, resolved
    assert resolved.summary.startswith(f"recovered from the hang at step 64 (job 77, restart 0): {summary}")
    alert, done = (" ".join(plain(m.message).split()) for m in smtp.received)
    assert "the template decides: restart in place (1 spare left) or requeue" in alert, alert
    assert "exiting 140 (requeue)" not in alert
    assert "RESOLVED" in smtp.received[1].message["Subject"], smtp.received[1].message["Subject"]
    assert " ".join(summary.split()) in done, done
