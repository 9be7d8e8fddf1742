"""Parsing what the controller and the environment say about the job."""
from __future__ import annotations

import signal
import time

import pytest

from trainguard.slurm.job import JobEnv, parse_job, parse_time_limit
from trainguard.stopping.switches import parse_stop_request

SHOW_JOB = ("JobId=88 JobName=train UserId=root(0) JobState=RUNNING Reason=None Requeue=1 "
            "Restarts=2 TimeLimit=00:10:00 StartTime=2026-11-22T02:55:46 "
            "EndTime=2026-11-22T03:05:46 NodeList=node[1-2] Command=/a b/train.slurm")


@pytest.mark.parametrize(("text", "seconds"), [
    ("5", 300), ("03:04", 184), ("01:02:03", 3723), ("2-00", 172800), ("1-02:03", 93780),
    ("1-02:03:04", 93784), ("UNLIMITED", None), ("Partition_Limit", None), ("x:y", None),
])
def test_time_limits_in_every_slurm_format(text: str, seconds: float | None) -> None:
    assert parse_time_limit(text) == seconds


def test_show_job_gives_state_endtime_and_limit() -> None:
    times = parse_job(SHOW_JOB, read_at=0.0)
    assert times.state == "RUNNING" and not times.being_cancelled
    assert times.time_limit == 600
    assert times.end_time == time.mktime((2026, 11, 22, 3, 5, 46, 0, 0, -1))
    cancelled = parse_job(SHOW_JOB.replace("RUNNING", "COMPLETING").replace(
        "EndTime=2026-11-22T03:05:46", "EndTime=Unknown"), 0.0)
    assert cancelled.being_cancelled and cancelled.end_time is None


def test_environment_names_the_chain_across_array_tasks() -> None:
    env = JobEnv.from_env({"SLURM_JOB_ID": "91", "SLURM_ARRAY_JOB_ID": "88", "SLURM_ARRAY_TASK_ID": "3",
                           "SLURM_RESTART_COUNT": "2", "SLURM_PROCID": "1"})
    assert env.chain_id == "88" and env.restart_count == 2 and env.procid == 1
    assert env.label == "91 (array 88_3)"
    torchrun = JobEnv.from_env({"SLURM_JOB_ID": "5", "SLURM_PROCID": "0", "RANK": "3"})
    assert torchrun.procid == 3 and torchrun.chain_id == "5"


def test_a_stop_request_from_another_job_or_an_earlier_restart_is_ignored() -> None:
    assert parse_stop_request("USR1 88 2\n", "88", 2) == signal.SIGUSR1
    assert parse_stop_request("TERM 88 2\n", "88", 2) == signal.SIGTERM
    assert parse_stop_request("USR1 88 1\n", "88", 2) is None
    assert parse_stop_request("USR1 87 2\n", "88", 2) is None
    assert parse_stop_request("", "88", 2) == signal.SIGUSR1      # a bare `touch` by hand
