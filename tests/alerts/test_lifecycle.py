"""Flip detection as a pure function: readings in, events out, clock passed in."""
from __future__ import annotations

from collections.abc import Sequence

from watchdogs.alerts.lifecycle import ItemState, Policy, Reading, decide
from watchdogs.result import Status

OK, WARN, CRIT = Status.OK, Status.WARNING, Status.CRITICAL
HOUR = 3600.0


def run(statuses: Sequence[Status | tuple[Status, str]], policy: Policy | None = None,
        step: float = 60.0, silenced: Sequence[bool] = ()) -> list[str | None]:
    """Feed readings one `step` apart; return the event of each."""
    state, events = ItemState("train-job"), []
    for i, reading in enumerate(statuses):
        status, fingerprint = reading if isinstance(reading, tuple) else (reading, "")
        now = 1000.0 + i * step
        decision = decide(state, Reading(status, status.name, now, fingerprint), policy or Policy(), now,
                          silenced=silenced[i] if i < len(silenced) else False)
        state = decision.state
        events.append(decision.event)
    return events


def test_only_changes_are_announced_not_every_reading() -> None:
    assert run([OK, CRIT, CRIT, CRIT, OK, OK]) == [None, "alert", None, None, "resolved", None]


def test_a_severity_change_is_announced_both_ways() -> None:
    assert run([WARN, CRIT, CRIT, WARN]) == ["alert", "changed", None, "changed"]


def test_still_failing_is_repeated_every_repeat_every() -> None:
    events = run([CRIT] * 10, Policy(repeat_every=4 * HOUR), step=HOUR)
    assert events == ["alert", None, None, None, "repeat", None, None, None, "repeat", None]


def test_after_n_bad_readings_damps_a_flapping_check() -> None:
    assert run([CRIT, OK, CRIT, CRIT, OK, CRIT, CRIT, CRIT, CRIT], Policy(after=3)) == \
        [None, None, None, None, None, None, None, "alert", None]


def test_a_damped_alert_that_recovers_says_nothing() -> None:
    assert run([CRIT, CRIT, OK], Policy(after=3)) == [None, None, None]


def test_a_severity_change_must_also_persist_for_after_readings() -> None:
    assert run([WARN, WARN, CRIT, WARN, CRIT, CRIT], Policy(after=2)) == \
        [None, "alert", None, None, None, "changed"]


def test_a_new_fingerprint_under_the_same_status_is_a_change() -> None:
    readings = [(CRIT, "node1"), (CRIT, "node1"), (CRIT, "node1,node2"), (CRIT, "node1,node2")]
    assert run(readings) == ["alert", None, "changed", None]


def test_the_failure_keeps_its_start_time_across_severity_changes() -> None:
    state = ItemState("x")
    for i, status in enumerate([WARN, CRIT, CRIT]):
        state = decide(state, Reading(status, "", 100.0 + i, ""), Policy(), 100.0 + i).state
    assert state.since == 100.0 and state.bad_streak == 3 and state.status_streak == 2


def test_an_acknowledged_alert_is_not_repeated_until_it_changes() -> None:
    state = decide(ItemState("x"), Reading(WARN, "", 0, ""), Policy(repeat_every=10), 0).state
    state = ItemState(**{**state.__dict__, "acked_at": 1.0, "acked_by": "me"})
    later = decide(state, Reading(WARN, "", 100, ""), Policy(repeat_every=10), 100)
    assert later.event is None
    worse = decide(later.state, Reading(CRIT, "", 110, ""), Policy(repeat_every=10), 110)
    assert worse.event == "changed" and worse.state.acked_at is None


def test_a_silenced_alert_is_recorded_and_said_once_the_silence_ends() -> None:
    events = run([CRIT, CRIT, CRIT, CRIT], silenced=[True, True, False, False])
    assert events == ["alert", None, "repeat", None]


def test_a_resolution_during_a_silence_leaves_nothing_to_say_afterwards() -> None:
    assert run([CRIT, OK, OK], silenced=[True, True, False]) == ["alert", "resolved", None]
