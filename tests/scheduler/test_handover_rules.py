"""The handover's pure rules: what a starting instance does from one squeue of the chain
(take over, ask its predecessor, or leave as superseded), when the next becomes eligible
(the lead capped at half a life cut short by --time-min), the warning's trigger, and the
last word's words."""
from __future__ import annotations

from datetime import datetime

import pytest

from watchdogs.scheduler import chain, lastword, remedies, successor
from watchdogs.scheduler.handover import decide


def job(id_: str, state: str, comment: str = "", start: str = "N/A", end: str = "N/A",
        reason: str = "None") -> chain.ChainJob:
    return chain.ChainJob(id_, state, reason, start, end, comment)


@pytest.mark.parametrize(("jobs", "action"), [
    ([job("5", "RUNNING", "watchdogs:next:4")], "take over"),
    ([job("4", "COMPLETING"), job("5", "RUNNING", "watchdogs:rescue:4")], "take over"),
    ([job("4", "RUNNING"), job("5", "RUNNING", "watchdogs:next:4")], "ask predecessor"),
    ([job("4", "RUNNING"), job("5", "RUNNING")], "ask predecessor"),  # `watchdogs start` by hand
    ([job("4", "RUNNING", "watchdogs:next:3"), job("5", "RUNNING", "watchdogs:rescue:3")], "superseded"),
    ([job("6", "PENDING", "watchdogs:rescue:5"), job("5", "RUNNING", "watchdogs:rescue:4")], "take over"),
])
def test_a_starting_instance_decides_from_the_chains_jobs(jobs: list[chain.ChainJob], action: str) -> None:
    assert decide("5", jobs).action == action


def test_asking_the_predecessor_cancels_its_rescue_which_would_only_leave_again() -> None:
    found = decide("5", [job("4", "RUNNING"), job("5", "RUNNING", "watchdogs:next:4"),
                         job("6", "PENDING", "watchdogs:rescue:4"),
                         job("7", "PENDING", "watchdogs:rescue:1")])
    assert found.cancel == ("6",)


def test_an_ending_predecessor_must_be_gone_before_the_state_is_opened() -> None:
    found = decide("5", [job("4", "COMPLETING"), job("5", "RUNNING", "watchdogs:next:4")])
    assert [j.id for j in found.others] == ["4"]


def test_the_comment_gives_role_and_predecessor_and_foreign_comments_are_a_start() -> None:
    nxt = job("5", "PENDING", "watchdogs:next:4")
    assert (nxt.role, nxt.predecessor) == ("next", "4")
    assert job("5", "PENDING", "my:own:note").role == "start"
    assert job("5", "PENDING", "").predecessor is None


def test_the_next_begins_a_lead_before_the_end_capped_at_half_a_short_life() -> None:
    now = datetime(2026, 11, 28, 10, 0)
    six_hours = job("4", "RUNNING", start="2026-11-28T09:00:00", end="2026-11-28T15:00:00")
    assert chain.next_begin(six_hours, 3600, now) == datetime(2026, 11, 28, 14, 0)
    cut = job("4", "RUNNING", start="2026-11-28T09:30:00", end="2026-11-28T10:30:00")  # --time-min
    assert chain.next_begin(cut, 3600, now) == datetime(2026, 11, 28, 10, 0)
    assert chain.next_begin(job("4", "RUNNING", end="Unknown"), 3600, now) is None


def test_the_warning_is_due_within_the_window_unless_a_successor_runs() -> None:
    own = job("4", "RUNNING", start="2026-11-28T09:00:00", end="2026-11-28T15:00:00")
    nxt = job("5", "PENDING", "watchdogs:next:4", start="2026-11-28T16:10:00", reason="Priority")
    found = chain.Successors(own, nxt, None, None, "")
    stops = datetime(2026, 11, 28, 14, 58)
    assert successor.warn_due(found, datetime(2026, 11, 28, 14, 42), 900) is None
    assert successor.warn_due(found, datetime(2026, 11, 28, 14, 43), 900) == stops
    running = chain.Successors(own, None, None, job("5", "RUNNING"), "")
    assert successor.warn_due(running, datetime(2026, 11, 28, 14, 50), 900) is None
    assert successor.pending_words(found) == "successor job 5 PENDING (Priority), Slurm expects it at 16:10"
    waiting = job("5", "PENDING", "watchdogs:next:4", start="2026-11-28T14:50:00", reason="BeginTime")
    not_yet = chain.Successors(own, waiting, None, None, "")  # a short life: the window opens first
    assert successor.warn_due(not_yet, datetime(2026, 11, 28, 14, 45), 900) is None
    assert successor.warn_due(not_yet, datetime(2026, 11, 28, 14, 50), 900) == stops


def test_the_last_word_names_who_cancelled_and_what_is_queued() -> None:
    by_root = lastword.who_ended("CANCELLED by 0", "terminated (SIGTERM)")
    assert by_root.startswith("was cancelled by root (uid 0")
    assert lastword.who_ended(None, "terminated (SIGTERM)") == (
        "was terminated (SIGTERM) (scancel, a preemption, a drain or a node shutdown)")
    words, nxt = lastword.successor_words(
        [job("4", "RUNNING"), job("5", "PENDING", "watchdogs:rescue:4", reason="Dependency"),
         job("6", "PENDING", "watchdogs:next:4", reason="BeginTime")], "4")
    assert words == "successor job 6 is queued (PENDING, BeginTime)" and nxt is not None and nxt.id == "6"
    assert lastword.successor_words([job("4", "RUNNING")], "4") == (None, None)


def test_remedies_name_partitions_with_idle_cpus_now() -> None:
    sinfo = "debug*|up|8/0/0/8\nspare|up|8/4/0/12\nlow|down|0/4/0/4\ncpu|up|3/1/0/4\n"
    assert remedies.idle_partitions(sinfo, "cpu") == [
        "partition spare has 4 idle CPUs now (SBATCH_PARTITION=spare)"]
