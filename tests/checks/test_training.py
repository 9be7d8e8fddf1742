"""`training`: trainguard's health records raised as alerts with their numbers, how long a
finding has lasted and the loss trend; the numbers kept for the metrics textfile."""
from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path

from tests.checks.conftest import tick, write_config
from trainguard.health.record import Finding, TrainingHealth
from trainguard.heartbeat import write_heartbeat
from watchdogs.checks.training import METRICS
from watchdogs.result import Status
from watchdogs.state.store import StateStore


def beats_dir(tmp_path: Path) -> Path:
    (tmp_path / "hb").mkdir(exist_ok=True)
    return tmp_path / "hb"


CHECK = '[[check]]\nname = "learning"\ntype = "training"\nheartbeats = "hb"\n'


def test_a_nan_loss_is_critical_and_names_the_step_the_action_and_the_last_good_checkpoint(
        tmp_path: Path, store: StateStore) -> None:
    now = time.time()
    nan = Finding("nan_loss", "loss nan at step 12,345 (last finite 2.31 at step 12,300)", 12345, now - 60)
    health = TrainingHealth(loss=2.31, loss_step=12300, nan_step=12345, nan_value="nan",
                            checkpoint_step=12000, action="stopped after step 12,345, not requeued (exit 5)",
                            findings=(nan,))
    write_heartbeat(beats_dir(tmp_path), 0, 12345, "stopping", now=now - 50, health=health)
    result = tick(write_config(tmp_path, CHECK), store)[0]["learning"]
    assert result.status is Status.CRITICAL
    assert result.summary == ("loss NaN at step 12,345 (last finite 2.31 at step 12,300); stopped after "
                              "step 12,345, not requeued (exit 5); last good checkpoint step 12,000")
    assert result.fingerprint == "nan_loss:rank0"
    assert store.kv_get(METRICS, "learning")["nan"] is True


def test_a_straggler_is_named_once_with_how_long_and_the_throughput_against_the_baseline(
        tmp_path: Path, store: StateStore) -> None:
    now = time.time()
    text = "rank 1 on node2 takes 1.9× the other ranks' median compute per step (0.19 s vs 0.1 s)"
    for rank in (0, 1):   # every rank finds the same straggler
        slow = Finding("straggler", text, 900, now - 600, rank=1, node="node2")
        health = TrainingHealth(loss=1.5, loss_step=1000, samples_per_s=61.0, unit="samples",
                                baseline=100.0, compute_time=0.1 if rank == 0 else 0.19, findings=(slow,))
        write_heartbeat(beats_dir(tmp_path), rank, 1000, "train", now=now - 5, health=health)
    result = tick(write_config(tmp_path, CHECK), store)[0]["learning"]
    assert result.status is Status.WARNING
    assert result.summary == f"{text} for 10 min 00 s; throughput 61% of baseline", result.summary
    assert result.fingerprint == "straggler:rank1"
    assert "compute per step 0.1–0.19 s over 2 ranks" in result.details[-1]


def test_a_healthy_training_is_ok_with_its_numbers_and_the_loss_trend(tmp_path: Path,
                                                                      store: StateStore) -> None:
    config = write_config(tmp_path, CHECK)
    start = datetime.now().astimezone()
    for minutes, step, loss in ((0, 100, 2.5), (30, 4000, 1.9)):
        when = start + timedelta(minutes=minutes)
        health = TrainingHealth(loss=loss, loss_step=step, steps_per_s=3.0, checkpoint_step=step - 100)
        write_heartbeat(beats_dir(tmp_path), 0, step, "train", now=when.timestamp(), health=health)
        result = tick(config, store, now=when)[0]["learning"]
    assert result.status is Status.OK
    assert result.summary == ("step 4,000, loss 1.9 (down from 2.5 30 min 00 s ago), 3 steps/s, "
                              "last checkpoint step 3,900"), result.summary


def test_no_records_is_ok_and_an_unreadable_record_does_not_hide_the_others(tmp_path: Path,
                                                                          store: StateStore) -> None:
    config = write_config(tmp_path, CHECK)
    (tmp_path / "hb").mkdir()
    first = tick(config, store)[0]["learning"]
    assert first.status is Status.OK and first.summary.startswith("no training-health records in ")
    (tmp_path / "hb" / "rank-0.json").write_text(json.dumps({"rank": 0, "step": 5, "phase": "train",
                                                             "time": time.time(), "health": {"loss": "x"}}))
    data_bound = Finding("data_bound", "data loader: 70% of the training time spent waiting for data "
                                       "(0.07 of 0.1 s per step)", 50, time.time() - 120)
    write_heartbeat(beats_dir(tmp_path), 1, 50, "train", health=TrainingHealth(findings=(data_bound,)))
    result = tick(config, store)[0]["learning"]
    assert result.status is Status.WARNING
    assert result.summary.startswith("rank 1 on ")
    assert "data loader: 70% of the training time" in result.summary
    assert result.summary.endswith("(for 2 min 00 s)"), result.summary


def test_an_unreadable_health_part_leaves_the_record_to_log_stale(tmp_path: Path, store: StateStore) -> None:
    (beats_dir(tmp_path) / "rank-0.json").write_text(json.dumps(
        {"rank": 0, "step": 5, "phase": "train", "time": time.time(), "health": {"loss": "x"}}))
    config = write_config(tmp_path, '[[check]]\nname = "hung"\ntype = "log_stale"\nheartbeats = "hb"\n')
    result = tick(config, store)[0]["hung"]
    assert result.status is Status.OK and "alive at step 5" in result.summary, result.summary


def test_each_look_keeps_a_sample_for_the_page_and_a_hung_rank_starts_one_hung_event(
        tmp_path: Path, store: StateStore) -> None:
    from trainguard.heartbeat import node_name
    from watchdogs.state import history

    config = write_config(tmp_path, CHECK)
    start = datetime.now().astimezone()
    looks = ((0, 100, "train"), (1, 160, "train"), (2, 160, "hung"), (3, 160, "hung"))
    for minutes, step, phase in looks:
        when = start + timedelta(minutes=minutes)
        health = TrainingHealth(loss=2.0 - step / 1000, loss_step=step, samples_per_s=50.0,
                                unit="samples", checkpoint_step=step - 60)
        write_heartbeat(beats_dir(tmp_path), 0, step, phase, now=when.timestamp(), health=health,
                        job_id="77", frames=("train.py:42 in all_reduce",) if phase == "hung" else ())
        tick(config, store, now=when)
    db = store.connection()
    kept = history.samples(db, "learning", 0)
    assert [(s.step, s.rate, s.checkpoint_step, s.phase) for s in kept] == [
        (100, 50.0, 40, "train"), (160, 50.0, 100, "train"), (160, 50.0, 100, "hung"),
        (160, 50.0, 100, "hung")]
    hung, = history.events(db, "learning", 0)
    assert (hung.kind, hung.job_id) == ("hung", "77")
    assert hung.cause == f"rank 0 on {node_name()} hung at step 160 in train.py:42 in all_reduce"
