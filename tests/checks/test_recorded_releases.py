"""What the watchdog's own sacct/squeue/sinfo calls printed on each Slurm release the dev
cluster runs (22.05, 24.11, 26.05; cgroup memory enforcement), recorded by
tests/fixtures/slurm/record_releases.py: the parsers and the explanations must read every
release alike. No cluster is needed."""
from __future__ import annotations

from pathlib import Path

import pytest

from watchdogs.slurmctl import ending as e
from watchdogs.slurmctl.sacct import parse_sacct
from watchdogs.slurmctl.sinfo import parse_sinfo
from watchdogs.slurmctl.squeue import parse_squeue

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
RELEASES = ("22.05", "24.11", "26.05")


def recorded(release: str, name: str) -> str:
    return (FIXTURES / release / name).read_text()


def job_ids(release: str) -> dict[str, str]:
    lines = recorded(release, "jobs.txt").splitlines()[1:]
    return dict(line.split() for line in lines)


def ending(release: str, job: str) -> e.Ending:
    rec = parse_sacct(recorded(release, "sacct-oom-cancelled-exit2.txt"))[job_ids(release)[job]]
    facts = e.EndFacts.from_sacct(rec, {0: "root"})
    return e.explain(facts, {}, [facts.nodelist])


@pytest.mark.parametrize("release", RELEASES)
def test_each_release_records_a_cgroup_memory_kill_as_out_of_memory(release: str) -> None:
    end = ending(release, "oom")
    assert end.facts.state == "OUT_OF_MEMORY" and end.kind == e.OUT_OF_MEMORY
    text = end.sentence()
    assert f"wd-rec-oom (job {job_ids(release)['oom']}) ran out of memory on node1" in text
    assert "100.0 MiB" in text
    # Never "peak 3.6 MiB of 100 MiB (4 %)" for a job the kernel killed at its limit.
    rss, req = end.facts.max_rss, end.facts.mem_per_node
    assert rss is not None and req is not None
    if rss < req * e.SAMPLED_SHORT:
        assert "the kernel killed it at its 100.0 MiB limit" in text and "last sample" in text
        assert "peak" not in text
    else:
        assert "peak" in text and "of the 100.0 MiB requested" in text


def test_a_kill_between_samples_is_not_called_a_low_peak() -> None:
    # 24.11 sampled 3.6 MiB before the kernel killed the job at 100 MiB.
    text = ending("24.11", "oom").sentence()
    assert "the kernel killed it at its 100.0 MiB limit (Slurm recorded 3.6 MiB at its last " \
           "sample before the kill" in text


@pytest.mark.parametrize("release", RELEASES)
def test_each_release_records_cancel_and_exit_code_alike(release: str) -> None:
    cancelled, failed = ending(release, "cancelled"), ending(release, "exit2")
    assert cancelled.kind == e.CANCELLED and cancelled.facts.cancelled_by == "root"
    assert "was cancelled by root (its owner)" in cancelled.sentence()
    assert failed.kind == e.FAILED and failed.facts.exit_code == "2:0"
    assert "failed on node1 after " in failed.sentence() and ": exit 2;" in failed.sentence()


@pytest.mark.parametrize("release", RELEASES)
def test_each_release_lists_running_and_held_jobs_alike(release: str) -> None:
    rows = {r.name: r for r in parse_squeue(recorded(release, "squeue-running-and-held.txt"))}
    assert rows["wd-rec-cancelled"].state == "RUNNING" and rows["wd-rec-cancelled"].nodelist == "node1"
    assert rows["wd-rec-held"].state == "PENDING" and rows["wd-rec-held"].reason == "JobHeldUser"


@pytest.mark.parametrize("release", RELEASES)
def test_each_release_shows_a_drained_node_with_its_reason(release: str) -> None:
    nodes = parse_sinfo(recorded(release, "sinfo-node2-drained.txt"))
    drained = [n for n in nodes if n.name == "node2"]
    assert drained and all(n.reason == "bad gpu" for n in drained)
    assert {n.name for n in nodes} == {"node1", "node2", "node3"}
