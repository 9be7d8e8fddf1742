"""The tick's one squeue snapshot: the query asks the controller for a superset of what
every check watches, and the row index gives each check exactly what a scan of every row
would (property-tested with Hypothesis). And what a check remembers between ticks."""
from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from watchdogs.slurmctl.jobspec import JobSpec, plan_queries
from watchdogs.slurmctl.snapshot import JobSnapshot
from watchdogs.slurmctl.squeue import JobQuery, JobRow
from watchdogs.state.store import StateStore

NAMES = ("train", "eval", "a,b", "train-7b")
USERS = ("alice", "bob", "carol")


def row(job_id: int, name: str, user: str, array_of: int | None = None, partition: str = "gpu") -> JobRow:
    raw = str(job_id)
    return JobRow(job_id=f"{array_of}_{job_id}" if array_of else raw, raw_id=raw,
                  array_job_id=str(array_of or job_id), array_task="1" if array_of else None,
                  state="RUNNING", user=user, partition=partition, start=None, end=None, submit=None,
                  elapsed=0.0, num_nodes=1, nodelist="", dependency=None, reason="None", name=name)


rows_strategy = st.lists(
    st.builds(row, st.integers(1, 40), st.sampled_from(NAMES), st.sampled_from(USERS),
              st.one_of(st.none(), st.integers(1, 40)), st.sampled_from(("gpu", "cpu", "gpu,cpu"))),
    max_size=30)
spec_strategy = st.builds(
    lambda name, regex, users, ids, parts: JobSpec(
        job_name=None if regex else name, job_regex=re.compile(regex) if regex else None,
        users=users, job_ids=ids, partitions=parts),
    st.sampled_from(NAMES), st.one_of(st.none(), st.sampled_from(("train.*", ".*", "e.*"))),
    st.sampled_from((("alice",), ("bob", "carol"), ("*",))),
    st.one_of(st.none(), st.lists(st.integers(1, 40).map(str), max_size=3).map(tuple)),
    st.one_of(st.none(), st.sampled_from((("gpu",), ("cpu",)))))


def resolve(users: tuple[str, ...]) -> frozenset[str] | None:
    return None if "*" in users else frozenset(users)


def reaches(query: JobQuery, r: JobRow) -> bool:
    """Would squeue return this row for this query (its filters ANDed)?"""
    ids_ok = query.job_ids is None or not query.job_ids or r.raw_id in query.job_ids or (
        r.array_job_id in query.job_ids)
    return ((query.users is None or not query.users or r.user in query.users)
            and (query.names is None or not query.names or r.name in query.names)
            and (query.partitions is None or bool(set(r.partition.split(",")) & set(query.partitions)))
            and ids_ok)


# No deadline: a loaded 2-core machine must not turn a slow example into a failure.
FEW = settings(max_examples=40, deadline=None)


@FEW
@given(rows_strategy, st.lists(spec_strategy, min_size=1, max_size=4))
def test_the_index_answers_every_spec_as_a_scan_of_every_row_would(rows: list[JobRow],
                                                                   specs: list[JobSpec]) -> None:
    users = {s.users: resolve(s.users) for s in specs}
    snapshot = JobSnapshot(tuple(rows), tuple(specs), users)
    for spec in specs:
        expected = [r for r in rows if spec.matches(r, users[spec.users])]
        assert snapshot.matching(spec) == expected
        assert snapshot.matching(spec) == expected  # the remembered answer too


@FEW
@given(rows_strategy, st.lists(spec_strategy, min_size=1, max_size=4))
def test_the_one_query_brings_every_row_some_check_watches(rows: list[JobRow], specs: list[JobSpec]) -> None:
    users = {s.users: resolve(s.users) for s in specs}
    [query] = plan_queries(specs, users)
    for spec in specs:
        for r in rows:
            if spec.matches(r, users[spec.users]):
                assert reaches(query, r), (query, r)


ME: dict[tuple[str, ...], frozenset[str] | None] = {(): frozenset({"me"})}


def test_a_name_with_a_comma_is_not_asked_by_name() -> None:
    [query] = plan_queries([JobSpec(job_name="a,b"), JobSpec(job_name="c")], ME)
    assert query.names is None and not any(a.startswith("--name") for a in query.argv())


def test_job_ids_are_asked_for_only_when_every_check_names_its_jobs() -> None:
    by_ids = [JobSpec(job_ids=("7",)), JobSpec(job_ids=("9", "8"))]
    [query] = plan_queries(by_ids, ME)
    assert "--jobs=7,8,9" in query.argv() and "--user=me" in query.argv()
    [mixed] = plan_queries([*by_ids, JobSpec(job_name="train")], ME)
    assert mixed.job_ids is None and mixed.names is None and "--user=me" in mixed.argv()


def test_an_empty_filter_set_asks_for_more_not_for_nothing() -> None:
    [query] = plan_queries([JobSpec(job_ids=())], ME)
    assert not any(a.startswith("--jobs") for a in query.argv())
    assert JobSnapshot((row(1, "x", "me"),), (JobSpec(job_ids=()),), ME).matching(JobSpec(job_ids=())) == []


def test_remembering_the_same_value_again_writes_nothing(tmp_path: Path) -> None:
    """A check that remembers what it remembered last tick costs no transaction (no fsync)."""
    store = StateStore(tmp_path / "state")
    store.kv_put("check.job", "train", {"job_ids": ["7"]})
    before = store.connection().total_changes
    store.kv_put("check.job", "train", {"job_ids": ["7"]})
    assert store.connection().total_changes == before
    store.kv_put("check.job", "train", {"job_ids": ["8"]})
    assert store.connection().total_changes == before + 1
    assert store.kv_get("check.job", "train") == {"job_ids": ["8"]}
