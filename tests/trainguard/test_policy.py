"""The cause -> action table, the agreement mask and the settings: pure functions."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from trainguard.causes import (
    END_AT_ONCE,
    EXIT_REQUEUE,
    Action,
    Cause,
    Policy,
    Save,
    causes_in,
    decide,
    flags_to_mask,
    mask_to_flags,
)
from trainguard.config import GuardConfig, config_from


def test_default_policy_requeues_only_time_limit_preemption_user_signal_memory_and_hang() -> None:
    policy = Policy()
    requeued = {c for c in Cause if c is not Cause.NO_TIME and policy.action(c).requeue}
    assert requeued == {Cause.TIME_LIMIT, Cause.PREEMPTION, Cause.USER_SIGNAL, Cause.MEMORY, Cause.HANG}
    assert policy.action(Cause.HANG).save is Save.NEVER   # a wedged collective cannot save
    assert all(policy.action(c).exit_code == EXIT_REQUEUE for c in requeued)
    assert policy.action(Cause.KILL_SWITCH).exit_code == 0
    assert policy.action(Cause.EXCEPTION).exit_code == 1
    assert not policy.action(Cause.SAVE_SWITCH).stop
    assert policy.action(Cause.TERMINATE).save is Save.IF_TIME


def test_an_action_requeues_exactly_when_its_exit_code_is_140() -> None:
    with pytest.raises(ValueError, match="140"):
        Action(Save.ALWAYS, stop=True, requeue=False, exit_code=140)
    with pytest.raises(ValueError, match="140"):
        Action(Save.ALWAYS, stop=True, requeue=True, exit_code=1)


def test_kill_switch_beats_a_time_limit_and_preemption_beats_a_plain_term() -> None:
    policy = Policy()
    both = decide(Cause.KILL_SWITCH.bit | Cause.TIME_LIMIT.bit | Cause.SAVE_SWITCH.bit, policy)
    assert both is not None and both.cause is Cause.KILL_SWITCH
    assert Cause.SAVE_SWITCH in both.causes
    mixed = decide(Cause.TERMINATE.bit | Cause.PREEMPTION.bit, policy)
    assert mixed is not None and mixed.cause is Cause.PREEMPTION and mixed.action.requeue
    assert decide(0, policy) is None


def test_a_plain_term_saves_only_when_no_rank_lacks_the_time() -> None:
    policy = Policy()
    with_time = decide(Cause.TERMINATE.bit, policy)
    no_time = decide(Cause.TERMINATE.bit | Cause.NO_TIME.bit, policy)
    assert with_time is not None and with_time.save
    assert no_time is not None and not no_time.save and no_time.action.exit_code == 143


def test_the_strict_scancel_policy_is_one_setting_away() -> None:
    config = GuardConfig().with_policy({"terminate": END_AT_ONCE})
    decision = decide(Cause.TERMINATE.bit, config.policy)
    assert decision is not None and not decision.save and not decision.action.requeue


def test_an_unknown_policy_key_names_the_known_causes() -> None:
    with pytest.raises(ValueError, match="'nap'.*time_limit"):
        Policy().with_overrides({"nap": END_AT_ONCE})


def test_mask_survives_the_flag_vector_used_by_all_reduce() -> None:
    mask = Cause.USER_SIGNAL.bit | Cause.NO_TIME.bit
    flags = mask_to_flags(mask)
    assert flags_to_mask(flags) == mask
    other = mask_to_flags(Cause.SAVE_SWITCH.bit)
    ored = [max(a, b) for a, b in zip(flags, other, strict=True)]   # what all_reduce(MAX) does
    assert causes_in(flags_to_mask(ored)) == {Cause.USER_SIGNAL, Cause.NO_TIME, Cause.SAVE_SWITCH}


def test_settings_come_from_the_environment_with_units() -> None:
    env = {"TRAINGUARD_CHECKPOINT_DIR": "/ckpt", "TRAINGUARD_EXIT_AFTER": "1h30m",
           "TRAINGUARD_MAX_RSS": "12GiB", "TRAINGUARD_SIGNALS": "USR2,TERM",
           "TRAINGUARD_SELF_REQUEUE": "yes", "TRAINGUARD_FILE_EVERY": "0.5"}
    config = config_from(env, keep=3)
    assert config.checkpoint_dir == Path("/ckpt")
    assert config.exit_after == 5400.0
    assert config.max_rss == 12 * 2**30
    assert config.signals == (signal.SIGUSR2, signal.SIGTERM)
    assert config.self_requeue is True and config.keep == 3 and config.file_every == 0.5


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("exit_after", "soon", "exit_after = 'soon': expected a duration"),
    ("max_rss", "lots", "max_rss = 'lots': expected a size"),
    ("signals", "USR9", "expected a signal name"),
    ("keep", 1, "keep = 1: expected 2 or more"),
    ("self_requeue", "perhaps", "self_requeue = 'perhaps': expected true or false"),
    ("nonsense", 1, "unknown trainguard setting 'nonsense'"),
])
def test_a_bad_setting_names_itself_its_value_and_what_was_expected(name: str, value: object,
                                                                    expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        config_from({}, **{name: value})


def test_the_agreement_cadence_is_about_one_interval_of_the_slowest_ranks_steps() -> None:
    from trainguard.stopping.agreement import MAX_EVERY, next_every
    assert next_every(0.01, 1.0, 10) == 100           # 10 ms steps: every 100 steps
    assert next_every(5.0, 1.0, 10) == 1              # slow steps: every step
    assert next_every(1e-7, 1.0, 10) == MAX_EVERY     # empty steps: bounded
    assert next_every(0.01, 0.0, 10) == 10            # no interval: the fixed cadence
