"""The resubmit and the run's recovery record, pure: a restart storm stops any resubmit;
`--exclude` names the NODE_FAIL's nodes and the run's suspects unless that leaves the
partition too few usable nodes, and excludes only the failed nodes when the partition
cannot be told; the alert's lines from a record (storm history, last recovery, suspects,
an unreadable record)."""
from __future__ import annotations

from tests.checks.test_job_ending import POLICY, RECORDED, USERS
from watchdogs.checks.recovery import Record, lines
from watchdogs.slurmctl import ending as e
from watchdogs.slurmctl.resubmit import decide, exclusion
from watchdogs.slurmctl.sacct import parse_sacct

HANG = ("node2", "node2: hang at step 41,200")


def late_failure() -> e.Ending:
    facts = e.EndFacts.from_sacct(parse_sacct(RECORDED)["3"], USERS)
    return e.explain(e.EndFacts(**{**facts.__dict__, "elapsed": 7200.0}), {}, ["node1"])


def test_a_restart_storm_stops_the_resubmit_whatever_the_ending_allows() -> None:
    assert decide(POLICY, [], 1e9, False, late_failure()).allowed
    stopped = decide(POLICY, [], 1e9, False, late_failure(), storm="5 restarts in 30 min")
    assert not stopped.allowed and stopped.key == "storm"
    assert stopped.why == ("Not resubmitted: the run ended its chain on purpose after a restart storm "
                           "(5 restarts in 30 min)")


def test_suspects_join_the_failed_nodes_in_the_exclusion() -> None:
    assert exclusion(["node1"], [HANG], ["node3", "node4"], 1) == (
        ("node1", "node2"), "suspect nodes excluded: node2: hang at step 41,200")
    assert exclusion([], [], ["node1"], 1) == ((), "")


def test_nothing_is_excluded_when_too_few_usable_nodes_would_be_left() -> None:
    assert exclusion(["node1"], [HANG], ["node2", "node3"], 2) == (
        (), "not excluding node1, node2: that would leave 1 usable node in the partition, and the job "
            "needs 2")


def test_an_unknown_partition_excludes_only_the_failed_nodes_as_before() -> None:
    exclude, said = exclusion(["node1"], [HANG], None, 1)
    assert exclude == ("node1",)
    assert said.startswith("suspect nodes not excluded (node2: hang at step 41,200): the job's partition")
    assert exclusion(["node1"], [], None, 1) == (("node1",), "")


def test_the_alert_lines_tell_the_storm_the_last_recovery_and_the_suspects() -> None:
    storm = {"kind": "storm", "job": "7", "reason": "5 restarts in 30 min",
             "history": ["2026-11-26 03:01:10  inplace  hang       node node2      from step 0 (job 7)"]}
    record = Record(({"kind": "restart", "job": "7"}, storm), ("node1.jsonl:3: not a whole record",),
                    (HANG,), "node2 stopped the run at step 41,200; node2 excluded")
    assert lines(record, "7") == [
        "restart storm: 5 restarts in 30 min; the chain was ended on purpose (no requeue, no "
        "resubmission). The restarts:",
        "  2026-11-26 03:01:10  inplace  hang       node node2      from step 0 (job 7)",
        "last recovery: node2 stopped the run at step 41,200; node2 excluded",
        "suspect nodes (excluded from the next start): node2: hang at step 41,200",
        "recovery record: 1 unreadable line(s) left out, e.g. node1.jsonl:3: not a whole record"]
    assert not any("storm" in line for line in lines(record, "8"))   # another job's storm
    assert lines(Record((), (), (), "", "filesystem not responding"), "7") == [
        "suspect nodes and restarts: not readable (filesystem not responding)"]
    assert lines(None, "7") == []
