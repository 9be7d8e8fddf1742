"""The chain's decisions on recorded Slurm answers, through an injected runner (no cluster):
one rescue and one next per running instance, what is not ours cancelled, a new one
submitted only when missing, the next's begin moved when the time limit moved."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from watchdogs.scheduler import chain
from watchdogs.slurmctl.runner import DEFAULT_TIMEOUT_S, SlurmReply

NOW = datetime(2026, 11, 28, 10, 0, 0)
OWN = "100|RUNNING|None|2026-11-28T09:00:00|2026-11-28T15:00:00|watchdogs:start:\n"


class Recorded:
    """Answers squeue with `queue` (lines of %i|%T|%r|%S|%e|%k), sbatch with a new id; logs every argv."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S,
                 env: Mapping[str, str] | None = None, input_text: str | None = None) -> SlurmReply:
        self.calls.append(tuple(argv))
        out = {"squeue": self.queue, "sbatch": "4242;cluster\n"}.get(argv[0], "")
        return SlurmReply(tuple(argv), out, "")

    def commands(self) -> list[str]:
        return [call[0] for call in self.calls]


def settings(tmp_path: Path) -> chain.ChainSettings:
    return chain.ChainSettings(tmp_path / "w.toml", tmp_path / "state", tmp_path / "STOP", "watchdogs")


def keep(tmp_path: Path, runner: Recorded, delay: float = 0.0, env: Mapping[str, str] | None = None) -> str:
    return chain.ensure_successor(settings(tmp_path), "100", Path("/s.slurm"), delay, env or {}, runner,
                                  lead=3600.0, now=NOW)


def test_a_pending_rescue_and_next_are_kept_and_nothing_is_submitted(tmp_path: Path) -> None:
    runner = Recorded(OWN + "101|PENDING|Dependency|N/A|N/A|watchdogs:rescue:100\n"
                      "102|PENDING|BeginTime|2026-11-28T14:00:00|N/A|watchdogs:next:100\n")
    done = keep(tmp_path, runner)
    assert done == "successor 101 already pending (Dependency); next 102 pending (BeginTime)"
    assert runner.commands() == ["squeue"]


def test_pending_jobs_that_are_not_this_instances_successors_are_cancelled(tmp_path: Path) -> None:
    runner = Recorded("99|PENDING|Dependency|N/A|N/A|watchdogs:rescue:98\n" + OWN
                      + "101|PENDING|Dependency|N/A|N/A|watchdogs:rescue:100\n"
                      "103|PENDING|Dependency|N/A|N/A|watchdogs:rescue:100\n"
                      "102|PENDING|BeginTime|2026-11-28T14:00:00|N/A|watchdogs:next:100\n")
    keep(tmp_path, runner)
    assert runner.calls[1] == ("scancel", "99", "103")
    assert runner.commands() == ["squeue", "scancel"]


def test_without_successors_a_rescue_after_this_job_and_a_next_before_its_end_are_submitted(
        tmp_path: Path) -> None:
    runner = Recorded(OWN)
    done = keep(tmp_path, runner, delay=120.0)
    rescue, nxt = runner.calls[1], runner.calls[2]
    assert done.startswith("submitted successor 4242, begins in 2m; submitted next 4242")
    assert "--dependency=afterany:100" in rescue and "--begin=now+120" in rescue
    assert "--comment=watchdogs:rescue:100" in rescue and rescue[-1] == "/s.slurm"
    assert not any(a.startswith("--dependency") for a in nxt)  # eligible, so it ages and backfills
    assert "--begin=2026-11-28T14:00:00" in nxt and "--comment=watchdogs:next:100" in nxt
    assert "--time-min=01:00:00" in nxt


def test_a_users_own_time_limit_gets_no_time_min_above_it(tmp_path: Path) -> None:
    runner = Recorded(OWN)
    keep(tmp_path, runner, env={"SBATCH_TIMELIMIT": "5"})
    assert not [a for call in runner.calls for a in call if a.startswith("--time-min")]


def test_a_time_limit_moved_by_an_administrator_moves_the_nexts_begin(tmp_path: Path) -> None:
    moved = OWN.replace("T15:00:00", "T13:00:00")
    runner = Recorded(moved + "101|PENDING|Dependency|N/A|N/A|watchdogs:rescue:100\n"
                      "102|PENDING|BeginTime|2026-11-28T14:00:00|N/A|watchdogs:next:100\n")
    keep(tmp_path, runner)
    assert runner.calls[1] == ("scontrol", "update", "JobId=102", "StartTime=2026-11-28T12:00:00")


def test_a_newer_instance_running_is_a_handover_under_way_and_nothing_is_queued(tmp_path: Path) -> None:
    runner = Recorded(OWN + "101|PENDING|Dependency|N/A|N/A|watchdogs:rescue:100\n"
                      "102|RUNNING|None|2026-11-28T10:00:00|2026-11-28T16:00:00|watchdogs:next:100\n")
    assert keep(tmp_path, runner) == "successor 102 is RUNNING: handing over"
    assert runner.commands() == ["squeue"]


def test_the_stop_file_asks_slurm_nothing(tmp_path: Path) -> None:
    (tmp_path / "STOP").touch()
    runner = Recorded("")
    assert "stop file" in keep(tmp_path, runner)
    assert runner.calls == []
