"""The training's story: consecutive looks of a job check told apart as events (a pure
function), written with the run in the state database, and pruned by log_retention with the
run history (the newest node count stays: it is where the line starts)."""
from __future__ import annotations

from pathlib import Path

from watchdogs.result import BadNode, CheckResult, JobLook, NodesLook, Notice, Status
from watchdogs.scheduler.records import Records
from watchdogs.scheduler.runs import FinishedRun
from watchdogs.scheduler.story import events_between
from watchdogs.state import history
from watchdogs.state.store import StateStore


def kinds(before: JobLook | None, now: JobLook, told: str | None = None) -> list[tuple[str, str | None, str]]:
    return [(e.kind, e.job_id, e.cause) for e in events_between("train", 100.0, before, now, told)]


def test_a_running_job_seen_waiting_again_was_requeued_with_its_pending_reason() -> None:
    assert kinds(JobLook("running", "7", 50.0), JobLook("queued", "7", None, "BeginTime")) == [
        ("requeued", "7", "waiting again (BeginTime)")]


def test_a_requeue_for_preemption_is_told_as_preempted() -> None:
    told = kinds(JobLook("running", "7", 50.0), JobLook("queued", "7", None, "Preempted"))
    assert told[0][0] == "preempted"


def test_the_same_job_running_with_a_new_start_was_requeued_between_two_looks() -> None:
    assert [k for k, _, _ in kinds(JobLook("running", "7", 50.0), JobLook("running", "7", 90.0))] == [
        "requeued", "running"]


def test_nothing_happens_while_the_same_run_goes_on() -> None:
    assert kinds(JobLook("running", "7", 50.0), JobLook("running", "7", 50.0)) == []
    assert kinds(JobLook("queued", "7", None, "Priority"), JobLook("queued", "7", None, "Resources")) == []


def test_a_new_job_waiting_is_queued_not_requeued() -> None:
    assert kinds(JobLook("running", "7", 50.0), JobLook("queued", "8", None, "Priority")) == [
        ("queued", "8", "Priority")]


def test_a_job_gone_ended_with_the_check_s_explanation_and_the_first_look_at_nothing_tells_nothing() -> None:
    assert kinds(JobLook("running", "7", 50.0), JobLook("gone", "7", None, "train (job 7) completed")) == [
        ("ended", "7", "train (job 7) completed")]
    assert kinds(None, JobLook("gone", None, None, "neither running nor queued")) == []


def test_accounting_s_requeue_notice_counts_when_the_look_itself_saw_none() -> None:
    told = "train (job 7) was requeued after running 3 s"
    assert kinds(JobLook("running", "7", 50.0), JobLook("running", "7", 50.0), told) == [
        ("requeued", "7", told), ("running", "7", "")]


def _run(item: str, t: float, result: CheckResult) -> FinishedRun:
    return FinishedRun(item, "check", 1, t, t + 1, result)


def test_recorded_with_the_run_and_pruned_by_log_retention(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    records = Records(store)
    looks = [(1000.0, JobLook("running", "7", 900.0)), (2000.0, JobLook("queued", "7", None, "BeginTime")),
             (3000.0, JobLook("running", "7", 2900.0))]
    records.finished([_run("train", t, CheckResult(Status.OK, "x", look=look)) for t, look in looks])
    nodes = NodesLook((BadNode("node2", "drained", "fan"),), 2)
    records.finished([_run("nodes", 1500.0, CheckResult(Status.WARNING, "x", look=NodesLook((), 2))),
                      _run("nodes", 2500.0, CheckResult(Status.WARNING, "x", look=nodes)),
                      _run("nodes", 2600.0, CheckResult(Status.WARNING, "x", look=nodes))])
    db = store.connection()
    with store.transaction() as tx:
        history.add_sample(tx, "train", history.Sample(1000.0, 10, 5.0, "samples", 0.5, 0, 0, "train"))
        history.add_sample(tx, "train", history.Sample(3000.0, 30, 5.0, "samples", 0.4, 20, 1, "train"))
    assert [e.kind for e in history.events(db, "train", 0)] == ["running", "requeued", "running"]
    assert [(c.t, c.drained) for c in history.node_counts(db, "nodes", 0)] == [(1500.0, 0), (2500.0, 1)]
    assert history.node_reasons(db, "nodes") == (("node2", "drained", "fan"),)

    records.prune(2800.0)
    assert [e.t for e in history.events(db, "train", 0)] == [3000.0]
    assert [s.step for s in history.samples(db, "train", 0)] == [30]
    assert [c.t for c in history.node_counts(db, "nodes", 0)] == [2500.0]   # the line's start stays
    store.close()


def test_a_requeue_notice_with_a_look_is_recorded_once(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    records = Records(store)
    notice = Notice("train (job 7) was requeued", kind="requeued")
    records.finished([_run("train", 1.0, CheckResult(Status.OK, "x", look=JobLook("running", "7", 0.5)))])
    records.finished([_run("train", 2.0, CheckResult(Status.OK, "x", notices=(notice,),
                                                     look=JobLook("running", "7", 1.5)))])
    told = history.events(store.connection(), "train", 0)
    assert [e.kind for e in told] == ["running", "requeued", "running"]
    store.close()
