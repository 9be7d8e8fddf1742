from __future__ import annotations

import pytest

from watchdogs import units


@pytest.mark.parametrize("text, seconds", [
    ("90s", 90), ("5m", 300), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("250ms", 0.25),
    ("1w", 604800),
])
def test_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert units.parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["5x", "", "m5", 5, "5 m x", "1h junk"])
def test_bad_durations_say_what_was_expected(bad: object) -> None:
    with pytest.raises(ValueError, match="a duration such as"):
        units.parse_duration(bad)


@pytest.mark.parametrize("text, size", [
    ("400TiB", 400 * 2**40), ("1.5TB", 1_500_000_000_000), ("800G", 800 * 2**30), (1024, 1024),
    ("512", 512), ("10MiB", 10 * 2**20),
])
def test_sizes_are_binary_unless_written_in_decimal(text: object, size: int) -> None:
    assert units.parse_size(text) == size


@pytest.mark.parametrize("bad", ["12Q", "-5", True, -1, "GiB", "5i"])
def test_bad_sizes_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        units.parse_size(bad)


def test_inode_counts_use_decimal_multipliers() -> None:
    assert units.parse_count("3M") == 3_000_000
    assert units.parse_count("500k") == 500_000
    assert units.parse_count(42) == 42


def test_percentages_must_carry_the_sign_and_stay_within_100() -> None:
    assert units.parse_percent("75%") == 75.0
    for bad in ("75", 75, "101%"):
        with pytest.raises(ValueError):
            units.parse_percent(bad)


def test_durations_format_for_people() -> None:
    assert units.format_duration(5400) == "1h30m"
    assert units.format_duration(42) == "42s"
    assert units.format_duration(2 * 86400 + 3 * 3600 + 60) == "2d3h"
