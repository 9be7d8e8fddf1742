"""Pure parts of the Slurm side: squeue/sinfo/scontrol/sacct parsing, query planning,
pending reasons, host lists, backoff and the resubmit decision."""
from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from watchdogs.result import Status
from watchdogs.slurmctl.backoff import Backoff, guarded
from watchdogs.slurmctl.hostlist import expand
from watchdogs.slurmctl.jobinfo import parse_scontrol_oneliner
from watchdogs.slurmctl.jobspec import JobSpec, plan_queries
from watchdogs.slurmctl.jobstatus import assess
from watchdogs.slurmctl.reasons import classify
from watchdogs.slurmctl.runner import SlurmBusy
from watchdogs.slurmctl.sinfo import parse_sinfo
from watchdogs.slurmctl.slurmtime import parse_elapsed
from watchdogs.slurmctl.squeue import SEP, JobQuery, parse_squeue
from watchdogs.state.store import StateStore

NOW = datetime(2026, 11, 22, 12, 0).astimezone()


def squeue_line(job_id: str, state: str, reason: str, name: str, start: str = "N/A",
                submit: str = "2026-11-22T10:00:00", array_task: str = "N/A") -> str:
    raw = job_id.split("_")[0]
    return SEP.join([job_id, raw, raw, array_task, state, "alice", "gpu", start, "N/A", submit,
                     "1:02:03", "2", "node[1-2]" if state == "RUNNING" else "", "(null)", reason, name])


def test_squeue_rows_keep_names_with_spaces_and_bars_and_clusters() -> None:
    text = "\n".join(["CLUSTER: north", squeue_line("7", "RUNNING", "None", "train | big run"),
                      "CLUSTER: south", squeue_line("8", "PENDING", "Priority", "x")])
    rows = parse_squeue(text)
    assert [(r.job_id, r.name, r.cluster) for r in rows] == [("7", "train | big run", "north"),
                                                            ("8", "x", "south")]
    assert rows[0].elapsed == 3723 and rows[0].running and rows[1].queued


def test_elapsed_times_in_every_squeue_form() -> None:
    assert [parse_elapsed(t) for t in ("0:04", "2:03:04", "1-02:03:04", "INVALID")] == [4, 7384, 93784, 0]


def test_one_query_covers_every_check_with_the_union_of_names_and_users() -> None:
    a = JobSpec(job_name="a", users=("alice",))
    b = JobSpec(job_name="b", users=("@team",), partitions=("gpu",))
    resolved = {("alice",): frozenset({"alice"}), ("@team",): frozenset({"bob", "carol"})}
    [query] = plan_queries([a, b], resolved)
    assert query == JobQuery(("alice", "bob", "carol"), ("a", "b"), None, None)
    argv = query.argv()
    assert "--user=alice,bob,carol" in argv and "--name=a,b" in argv and "--states=all" in argv
    assert not any(a.startswith("--partition") for a in argv)


def test_a_regex_check_or_anyone_removes_that_filter_and_clusters_get_their_own_call() -> None:
    regex = JobSpec(job_regex=re.compile("train-.*"), users=("*",))
    remote = JobSpec(job_name="r", users=("alice",), cluster="south")
    resolved = {("*",): None, ("alice",): frozenset({"alice"})}
    local, far = plan_queries([regex, remote], resolved)
    assert local == JobQuery(None, None, None, None)
    assert far.clusters == ("south",) and far.names == ("r",)


def test_regex_must_match_the_whole_name() -> None:
    spec = JobSpec(job_regex=re.compile("train-.*"))
    rows = parse_squeue("\n".join([squeue_line("1", "RUNNING", "None", "train-7b"),
                                   squeue_line("2", "RUNNING", "None", "pretrain-7b")]))
    assert [r.job_id for r in rows if spec.matches(r, None)] == ["1"]


@pytest.mark.parametrize(("reason", "status"), [
    ("Priority", Status.OK), ("Resources", Status.OK), ("Dependency", Status.OK),
    ("BeginTime", Status.OK), ("JobArrayTaskLimit", Status.OK),
    ("JobHeldUser", Status.WARNING), ("JobHeldAdmin", Status.WARNING),
    ("ReqNodeNotAvail, UnavailableNodes:node2", Status.WARNING), ("PartitionDown", Status.WARNING),
    ("QOSGrpGRES", Status.WARNING), ("AssocGrpCpuLimit", Status.WARNING),
    ("DependencyNeverSatisfied", Status.CRITICAL), ("launch failed requeued held", Status.CRITICAL),
    ("QOSMaxWallDurationPerJobLimit", Status.CRITICAL), ("SomethingNew", Status.WARNING),
])
def test_pending_reasons_are_benign_or_need_a_person(reason: str, status: Status) -> None:
    assert classify(reason)[0] is status


def test_slurm_estimate_is_said_in_words_and_the_one_year_placeholder_is_not() -> None:
    soon = (NOW + timedelta(hours=2, minutes=13)).strftime("%Y-%m-%dT%H:%M:%S")
    never = (NOW + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%S")
    rows = parse_squeue("\n".join([squeue_line("1", "PENDING", "Resources", "a", start=soon),
                                   squeue_line("2", "PENDING", "Resources", "b", start=never)]))
    first = assess(rows[:1], NOW)
    assert "scheduled to start in 2 h 13 min at 2026-11-22 14:13 " in first.summary
    assert "scheduled" not in assess(rows[1:], NOW).summary


def test_a_chain_has_waited_only_since_its_job_last_ran() -> None:
    rows = parse_squeue(squeue_line("1", "PENDING", "Dependency", "a", submit="2026-11-20T00:00:00"))
    ran = (NOW - timedelta(minutes=30)).timestamp()
    assert "waiting 30 min 00 s" in assess(rows, NOW, last_running_at=ran, max_pending=3600).summary
    assert assess(rows, NOW, max_pending=3600).status is Status.WARNING


def test_scontrol_oneliner_keeps_values_with_spaces() -> None:
    line = ("JobId=5 JobName=my train UserId=root(0) JobState=FAILED Reason=NonZeroExitCode "
            "Dependency=(null) ExitCode=3:0 RunTime=00:00:01 EndTime=2026-11-22T11:58:00 Partition=debug")
    fields = parse_scontrol_oneliner(line)
    assert (fields["JobName"], fields["ExitCode"], fields["Partition"]) == ("my train", "3:0", "debug")


def test_sinfo_rows_say_what_is_bad_and_what_is_usable() -> None:
    text = "\n".join(SEP.join(f) for f in (
        ("n1", "gpu", "drained", "root", "2026-11-22T11:00:00", "bad gpu"),
        ("n2", "gpu", "draining", "ops", "2026-11-22T11:30:00", "ECC errors, replace"),
        ("n3", "gpu", "down*", "Unknown", "Unknown", "Not responding"),
        ("n4", "gpu", "idle*", "Unknown", "Unknown", "none"),
        ("n5", "gpu", "mixed", "Unknown", "Unknown", "none"),
        ("n6", "gpu", "idle", "Unknown", "Unknown", "none")))
    rows = {r.name: r for r in parse_sinfo(text)}
    assert [n for n, r in rows.items() if r.bad] == ["n1", "n2", "n3"]
    assert [n for n, r in rows.items() if r.available] == ["n5", "n6"]
    assert rows["n2"].reason == "ECC errors, replace" and rows["n2"].reason_user == "ops"


def test_host_lists_expand_ranges_with_padding() -> None:
    # as `scontrol show hostnames` expands it: each range keeps its own zero padding
    assert expand("gpu[01-03,7],cpu1") == ["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"]


def test_busy_controller_is_left_alone_for_a_growing_delay(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    calls: list[int] = []

    def busy() -> None:
        calls.append(1)
        raise SlurmBusy("squeue failed: rate limit exceeded")
    with pytest.raises(SlurmBusy):
        guarded(store, "squeue", 1000.0, busy)
    with pytest.raises(SlurmBusy, match="not asking again for"):
        guarded(store, "squeue", 1010.0, busy)
    assert len(calls) == 1
    assert guarded(store, "squeue", 1021.0, lambda: "ok") == "ok"
    assert Backoff(3, 0).after_failure(0.0) == Backoff(4, 160.0)
    assert Backoff(10, 0).after_failure(0.0).until == 600.0


