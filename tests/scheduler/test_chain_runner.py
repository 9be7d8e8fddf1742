"""The chain's decisions on recorded Slurm answers, through an injected runner (no cluster):
exactly one successor, extras cancelled, a new one submitted only when none is pending."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from watchdogs.scheduler import chain
from watchdogs.slurmctl.runner import DEFAULT_TIMEOUT_S, SlurmReply


class Recorded:
    """Answers squeue with `queue` (lines of %i|%T|%r|%S), sbatch with a new id; logs every argv."""

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


def test_a_pending_successor_is_kept_and_nothing_is_submitted(tmp_path: Path) -> None:
    runner = Recorded("100|RUNNING|None|now\n101|PENDING|Dependency|N/A\n")
    done = chain.ensure_successor(settings(tmp_path), "100", Path("/s.slurm"), 0.0, {}, runner)
    assert done == "successor 101 already pending (Dependency)"
    assert runner.commands() == ["squeue"]


def test_extra_pending_successors_are_cancelled_keeping_the_oldest(tmp_path: Path) -> None:
    runner = Recorded("103|PENDING|Dependency|N/A\n100|RUNNING|None|now\n101|PENDING|Dependency|N/A\n")
    chain.ensure_successor(settings(tmp_path), "100", Path("/s.slurm"), 0.0, {}, runner)
    assert runner.calls[1] == ("scancel", "103")
    assert runner.commands() == ["squeue", "scancel"]


def test_without_a_successor_one_is_submitted_after_this_job(tmp_path: Path) -> None:
    runner = Recorded("100|RUNNING|None|now\n")
    done = chain.ensure_successor(settings(tmp_path), "100", Path("/s.slurm"), 120.0, {}, runner)
    sbatch = runner.calls[1]
    assert done.startswith("submitted successor 4242")
    assert "--dependency=afterany:100,singleton" in sbatch and "--begin=now+120" in sbatch
    assert sbatch[-1] == "/s.slurm"


def test_the_stop_file_asks_slurm_nothing(tmp_path: Path) -> None:
    (tmp_path / "STOP").touch()
    runner = Recorded("")
    assert "stop file" in chain.ensure_successor(settings(tmp_path), "100", Path("/s.slurm"), 0.0, {}, runner)
    assert runner.calls == []
