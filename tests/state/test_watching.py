"""watchdogs.state.watching.judge: is anyone watching, from the latest instance, the chain's
jobs in Slurm, the stop file and the clock (all passed in: a pure table)."""
from __future__ import annotations

import pytest

from watchdogs.result import Status
from watchdogs.state.watching import ChainJob, Instance, Watching, judge

NOW = 1_800_000_000.0
TICK = 10.0
STALE = 300.0
LIMIT = TICK + 60.0  # the period plus the grace floor


def chain(job: str = "100", heartbeat: float = NOW - 3, ended: float | None = None, reason: str | None = None,
          mode: str = "chain") -> Instance:
    return Instance(job, mode, "node1", 4242, NOW - 3600, heartbeat, ended, reason)


def job(job_id: str, state: str, reason: str = "", start: float | None = None, end: float | None = None,
        submitted: float | None = None) -> ChainJob:
    return ChainJob(job_id, state, reason, start, end, submitted, "")


def see(latest: Instance | None, jobs: list[ChainJob] | None, period: float = TICK, stale: float = STALE,
        stopped_since: float | None = None, slurm_error: str | None = None,
        unread: str | None = None) -> Watching:
    return judge(latest, jobs, NOW, period, stale, stopped_since=stopped_since, slurm_error=slurm_error,
                 unread=unread)


def test_an_instance_that_ticked_within_its_period_is_watching_and_ok() -> None:
    seen = see(chain(), [job("100", "RUNNING", end=NOW + 6 * 3600)])
    assert (seen.state, seen.status) == ("watching", Status.OK)
    assert seen.since is None and seen.blind_for(NOW) == 0


def test_a_successor_pending_after_the_instance_ended_is_blind_since_its_end_with_the_reason() -> None:
    ended = NOW - 20
    seen = see(chain(ended=ended, reason="handover"), [job("100", "COMPLETED"),
                                                       job("101", "PENDING", "Priority", start=NOW + 600)])
    assert (seen.state, seen.status, seen.since) == ("blind", Status.WARNING, ended)
    assert "successor job 101 PENDING (Priority), Slurm expects it at" in seen.why
    assert "BLIND since" in seen.headline


def test_blind_longer_than_one_period_and_the_grace_is_critical() -> None:
    seen = see(chain(ended=NOW - LIMIT - 1, reason="handover"), [job("101", "PENDING", "Resources")])
    assert (seen.state, seen.status) == ("blind", Status.CRITICAL)
    assert seen.blind_for(NOW) == pytest.approx(LIMIT + 1)


def test_a_cancelled_chain_with_nothing_queued_is_blind_and_says_to_start_it() -> None:
    seen = see(chain(ended=NOW - 600, reason="crashed: SIGTERM"), [job("100", "CANCELLED")])
    assert seen.status is Status.CRITICAL
    assert "chain cancelled, nothing queued: run `watchdogs start`" in seen.why
    assert "crashed: SIGTERM" in seen.why


def test_an_instance_whose_job_left_slurm_without_recording_its_end_is_blind_since_its_last_tick() -> None:
    seen = see(chain(heartbeat=NOW - 5), [job("100", "CANCELLED")])
    assert (seen.state, seen.since) == ("blind", NOW - 5)
    assert "without recording its end (Slurm: CANCELLED)" in seen.why


def test_a_frozen_instance_is_not_ticking_and_critical_long_before_heartbeat_stale() -> None:
    seen = see(chain(heartbeat=NOW - LIMIT - 1), [job("100", "RUNNING")])
    assert (seen.state, seen.status) == ("not ticking", Status.CRITICAL)
    assert "NOT TICKING" in seen.why and "claims to run" in seen.why


def test_heartbeat_stale_stays_the_outer_bound_and_says_not_running() -> None:
    seen = see(chain(heartbeat=NOW - 5), None, stale=2.0)
    assert seen.status is Status.CRITICAL and "HEARTBEAT STALE" in seen.why and "is NOT running" in seen.why


def test_a_successor_running_but_not_yet_ticked_is_handing_over_then_blind() -> None:
    ended = NOW - 5
    jobs = [job("100", "COMPLETED"), job("101", "RUNNING", start=NOW - 4)]
    assert see(chain(ended=ended, reason="handover"), jobs).state == "handing over"
    late = [job("100", "COMPLETED"), job("101", "RUNNING", start=NOW - LIMIT - 1)]
    seen = see(chain(ended=ended, reason="handover"), late)
    assert (seen.state, seen.status) == ("blind", Status.CRITICAL) and "runs but has not ticked" in seen.why


def test_near_its_time_limit_without_a_running_successor_it_goes_blind_with_a_warning() -> None:
    jobs = [job("100", "RUNNING", end=NOW + 600), job("101", "PENDING", "Priority", start=NOW + 3600)]
    seen = see(chain(), jobs)
    assert (seen.state, seen.status) == ("goes blind", Status.WARNING)
    assert seen.until == NOW + 600 - 120
    assert "successor job 101 PENDING (Priority)" in seen.headline
    assert see(chain(), [*jobs[:1], job("101", "RUNNING", start=NOW)]).state == "watching"


@pytest.mark.parametrize(("latest", "jobs"), [(chain(), [job("100", "RUNNING")]),
                                              (chain(ended=NOW - 30, reason="stop file"), [])])
def test_stop_on_purpose_is_not_blind_and_not_ok(latest: Instance, jobs: list[ChainJob]) -> None:
    seen = see(latest, jobs, stopped_since=NOW - 30)
    assert seen.state in ("stopping", "stopped") and seen.status is Status.WARNING
    assert "`watchdogs start`" in seen.why and "BLIND" not in seen.why


def test_nothing_ever_recorded_and_nothing_queued_is_never_started_and_critical() -> None:
    seen = see(None, [])
    assert (seen.state, seen.status) == ("never started", Status.CRITICAL)
    assert "run `watchdogs start`" in seen.why
    unasked = see(None, None, slurm_error="squeue: timeout")
    assert unasked.status is Status.CRITICAL and "Slurm could not be asked" in unasked.why


def test_a_first_instance_pending_is_blind_since_its_submission() -> None:
    jobs = [job("7", "PENDING", "Resources", submitted=NOW - 10)]
    assert see(None, jobs).status is Status.WARNING
    jobs = [job("7", "PENDING", "Resources", submitted=NOW - 3600)]
    seen = see(None, jobs)
    assert seen.status is Status.CRITICAL and "not watching yet" in seen.why


def test_an_unreadable_state_is_unknown_not_never_started() -> None:
    seen = see(None, [], unread="the view is a FIFO")
    assert (seen.state, seen.status) == ("unknown", Status.UNKNOWN)


def test_a_periodic_home_ended_run_is_watching_until_its_period_and_grace_pass() -> None:
    home = chain(job="", heartbeat=NOW - 50, ended=NOW - 50, reason="done", mode="scrontab")
    assert see(home, [], period=60.0).state == "watching"
    late = chain(job="", heartbeat=NOW - 200, ended=NOW - 200, reason="done", mode="scrontab")
    seen = see(late, [], period=60.0)
    assert (seen.state, seen.status) == ("blind", Status.CRITICAL) and "scrontab home" in seen.why


def test_a_foreground_scheduler_without_a_job_is_judged_by_its_heartbeat_alone() -> None:
    fg = Instance(None, "foreground", "login1", 99, NOW - 60, NOW - 2, None, None)
    assert see(fg, []).state == "watching"
    ended = Instance(None, "foreground", "login1", 99, NOW - 60, NOW - 2, NOW - 2, "SIGTERM")
    seen = see(ended, None, slurm_error="no Slurm here")
    assert seen.state == "blind" and "pid 99 ended" in seen.why
