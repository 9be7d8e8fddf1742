"""Schedules are pure functions of (previous run, now): crontab parsing as cron means it,
and anacron-style catch-up from the last completed run."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from watchdogs.schedules import (
    SPEC_EXPECTED,
    Schedule,
    cron_day_of_week,
    cron_trigger,
    every,
    first_run,
    parse_spec,
)

UTC = timezone.utc
NOW = datetime(2026, 3, 4, 12, 30, 10, tzinfo=UTC)  # a Wednesday


def test_shorthands_map_to_cron_expressions() -> None:
    assert parse_spec("@hourly") == Schedule("cron", expr="0 * * * *")
    assert parse_spec("@daily") == Schedule("cron", expr="0 0 * * *")
    assert parse_spec("@weekly") == Schedule("cron", expr="0 0 * * 0")
    assert parse_spec("@reboot") == Schedule("reboot")
    assert parse_spec("@every 90s") == Schedule("interval", seconds=90.0)


@pytest.mark.parametrize("bad", ["* * * *", "61 * * * *", "@fortnightly", "* * * * * *", "@every soon"])
def test_bad_schedule_says_what_was_expected(bad: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_spec(bad)
    assert str(err.value)


def test_bad_field_count_names_the_accepted_forms() -> None:
    with pytest.raises(ValueError, match="5 cron fields"):
        parse_spec("* * *")
    assert "@reboot" in SPEC_EXPECTED


@pytest.mark.parametrize(("field", "names"), [
    ("0", "sun"), ("7", "sun"), ("1-5", "mon,tue,wed,thu,fri"), ("sat,sun", "sun,sat"),
    ("*/2", "sun,tue,thu,sat"), ("5-7", "sun,fri,sat"),
])
def test_day_of_week_counts_from_sunday_like_cron(field: str, names: str) -> None:
    assert cron_day_of_week(field) == names


def test_monday_to_friday_never_fires_on_the_weekend() -> None:
    trigger = cron_trigger("0 9 * * 1-5", UTC)
    saturday = datetime(2026, 3, 7, 0, 0, tzinfo=UTC)
    assert trigger.get_next_fire_time(None, saturday) == datetime(2026, 3, 9, 9, 0, tzinfo=UTC)


def test_day_of_month_or_day_of_week_either_matches_as_in_cron() -> None:
    # "the 1st, and every Monday": cron fires on both, APScheduler's plain AND on neither.
    trigger = cron_trigger("0 0 1 * 1", UTC)
    fires, t = [], datetime(2026, 3, 1, 0, 0, 1, tzinfo=UTC)
    for _ in range(3):
        t = trigger.get_next_fire_time(None, t)
        fires.append(t.day)
        t += timedelta(seconds=1)
    assert fires == [2, 9, 16]
    assert trigger.get_next_fire_time(None, datetime(2026, 3, 30, 0, 0, 1, tzinfo=UTC)).day == 1


def test_never_completed_item_runs_at_once() -> None:
    assert first_run(every(3600), None, NOW, UTC) == NOW
    assert first_run(parse_spec("0 3 * * *"), None, NOW, UTC) == NOW


def test_overdue_by_many_periods_runs_once_now() -> None:
    anchor = NOW - timedelta(hours=30)
    assert first_run(every(3600), anchor, NOW, UTC) == NOW
    assert first_run(parse_spec("@hourly"), anchor, NOW, UTC) == NOW


def test_item_not_yet_due_waits_for_anchor_plus_period() -> None:
    anchor = NOW - timedelta(minutes=20)
    assert first_run(every(3600), anchor, NOW, UTC) == anchor + timedelta(hours=1)


def test_cron_item_waits_for_the_next_fire_after_its_last_run() -> None:
    anchor = datetime(2026, 3, 4, 12, 0, 0, 300000, tzinfo=UTC)
    assert first_run(parse_spec("@hourly"), anchor, NOW, UTC) == datetime(2026, 3, 4, 13, 0, tzinfo=UTC)


def test_reboot_item_runs_at_every_start_even_after_a_recent_run() -> None:
    assert first_run(parse_spec("@reboot"), NOW - timedelta(seconds=5), NOW, UTC) == NOW
