"""The chain's pure rules: crash-loop backoff from the previous instances, and the
settings it needs even when the config is broken."""
from __future__ import annotations

from pathlib import Path

from watchdogs.scheduler.chain import BACKOFF_BASE_S, BACKOFF_CAP_S, crash_backoff, lenient_settings
from watchdogs.scheduler.runs import Life


def life(lived: float, reason: str | None = "terminated (SIGTERM)", heartbeat_only: bool = False) -> Life:
    if heartbeat_only:  # killed hard: no end record, only its last heartbeat
        return Life(0, "1", 1000.0, 1000.0 + lived, None, None)
    return Life(0, "1", 1000.0, 1000.0 + lived, 1000.0 + lived, reason)


def test_one_early_death_is_forgiven() -> None:
    assert crash_backoff([life(5, "config error (1 problem)")]) == (0.0, 1)


def test_repeated_early_deaths_back_off_exponentially_up_to_a_cap() -> None:
    crash = life(3, "config error (1 problem)")
    assert crash_backoff([crash] * 2) == (BACKOFF_BASE_S, 2)
    assert crash_backoff([crash] * 3) == (2 * BACKOFF_BASE_S, 3)
    assert crash_backoff([crash] * 30) == (BACKOFF_CAP_S, 30)


def test_a_long_life_or_a_handover_ends_the_streak() -> None:
    crash = life(3, "crashed: RuntimeError: boom")
    assert crash_backoff([crash, crash, life(3600), crash, crash]) == (BACKOFF_BASE_S, 2)
    assert crash_backoff([crash, life(10, "handover (SIGUSR1: time limit near)"), crash]) == (0.0, 1)


def test_hard_kill_is_judged_by_its_last_heartbeat() -> None:
    assert crash_backoff([life(2, heartbeat_only=True)] * 2)[0] == BACKOFF_BASE_S
    assert crash_backoff([life(600, heartbeat_only=True)] * 2) == (0.0, 0)


def test_lenient_settings_survive_a_broken_config(tmp_path: Path) -> None:
    config = tmp_path / "watchdogs.toml"
    config.write_text('[scheduler]\nstate_dir = "st"\njob_name = "wd-x"\ntick = "soon"\n'
                      '[[check]]\nname = 1\n')
    settings = lenient_settings(config)
    assert (settings.state_dir, settings.stop_file, settings.job_name) == (
        tmp_path / "st", tmp_path / "st" / "STOP", "wd-x")


def test_lenient_settings_of_unparseable_toml_fall_back_to_defaults(tmp_path: Path) -> None:
    config = tmp_path / "watchdogs.toml"
    config.write_text("[scheduler\nnot toml")
    settings = lenient_settings(config)
    assert settings.job_name == "watchdogs-cron"
    assert settings.state_dir == Path("~/.local/state/watchdogs").expanduser()
