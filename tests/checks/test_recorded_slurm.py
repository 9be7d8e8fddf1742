"""The `job` and `nodes` checks' logic on Slurm output recorded from the dev cluster
(tests/fixtures/slurm), through the tick's injectable Slurm runner: no cluster needed, so
these run in milliseconds. The real-cluster tests (test_job.py, test_nodes.py) stay."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from tests.checks.conftest import build_checks, write_config
from watchdogs.checks.base import run_check
from watchdogs.checks.context import TickContext
from watchdogs.errors import SlurmError
from watchdogs.result import CheckResult, Status
from watchdogs.slurmctl.runner import DEFAULT_TIMEOUT_S, SlurmReply
from watchdogs.state.store import StateStore

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
# The squeue recording: job 47 (wd-rec-train) running on node1, job 48 (wd-rec-held) held.
NOW = datetime.fromisoformat("2026-11-23T05:06:00").astimezone()


class Recorded:
    """A Slurm runner that answers each command (by its name) with recorded output, or
    raises the recorded failure; it keeps every argv it was asked to run."""

    def __init__(self, replies: Mapping[str, str | SlurmError]) -> None:
        self.replies = dict(replies)
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S,
                 env: Mapping[str, str] | None = None, input_text: str | None = None) -> SlurmReply:
        self.calls.append(tuple(argv))
        asks_outputs = f"{argv[0]} -O"  # the once-per-job question for stdout/stderr paths
        reply = self.replies[asks_outputs if "-O" in argv and asks_outputs in self.replies else argv[0]]
        if isinstance(reply, SlurmError):
            raise reply
        return SlurmReply(tuple(argv), reply, "")


def recording(name: str) -> str:
    return (RECORDED / name).read_text()


def job_checks(*names: str) -> str:
    return "".join(f'[[check]]\nname = "{n}"\ntype = "job"\njob_name = "wd-rec-{n}"\nusers = ["*"]\n'
                   for n in names)


def run_tick(tmp_path: Path, body: str, runner: Recorded) -> dict[str, CheckResult]:
    config = write_config(tmp_path, body)
    checks = build_checks(config)
    store = StateStore(tmp_path / "state")
    try:
        ctx = TickContext(NOW, store, checks, config=config, runner=runner)
        return {c.name: run_check(c, ctx) for c in checks}
    finally:
        store.close()


# squeue -O JobID,StdOut,StdErr of those jobs (22.05: patterns, made absolute by sbatch).
OUTPUTS = ("47\x1f/home/u/runs/train-%j.out\x1f/home/u/runs/train-%j.out\x1f\n"
           "48\x1f/home/u/runs/slurm-%j.out\x1f/home/u/runs/slurm-%j.out\x1f\n")


def test_running_and_held_jobs_are_judged_from_one_recorded_squeue(tmp_path: Path) -> None:
    runner = Recorded({"squeue": recording("squeue-running-and-held.txt"), "squeue -O": OUTPUTS})
    results = run_tick(tmp_path, job_checks("train", "held"), runner)
    # The listing, and one question for the log paths of the new running job (asked once in
    # its life; the held job is asked when it runs).
    assert [argv[0] for argv in runner.calls] == ["squeue", "squeue"]
    assert "--name=wd-rec-held,wd-rec-train" in runner.calls[0]
    assert "--jobs=47" in runner.calls[1]
    train, held = results["train"], results["held"]
    assert train.status is Status.OK and train.fingerprint == "running"
    assert train.summary.startswith("running: wd-rec-train (job 47) on node1")
    assert train.context["job"] == "47"
    assert held.status is Status.WARNING and held.fingerprint == "queued:JobHeldUser"
    assert "held by its user (release with `scontrol release 48`)" in held.summary


def test_the_log_paths_of_a_job_are_asked_once_in_its_life_and_kept(tmp_path: Path) -> None:
    runner = Recorded({"squeue": recording("squeue-running-and-held.txt"), "squeue -O": OUTPUTS})
    run_tick(tmp_path, job_checks("train", "held"), runner)
    runner.calls.clear()
    run_tick(tmp_path, job_checks("train", "held"), runner)
    assert [argv[0] for argv in runner.calls] == ["squeue"]  # the tick's one listing, no more
    store = StateStore(tmp_path / "state")
    try:
        kept = store.kv_get("check.job", "train")["outputs"]
    finally:
        store.close()
    assert kept == {"47": {"stdout": "/home/u/runs/train-%j.out", "stderr": "/home/u/runs/train-%j.out"}}


def test_a_failing_squeue_is_unknown_never_job_gone(tmp_path: Path) -> None:
    runner = Recorded({"squeue": SlurmError("squeue failed (exit 1): slurm_load_jobs error: "
                                            "Unable to contact slurm controller (connect failure)")})
    result = run_tick(tmp_path, job_checks("train"), runner)["train"]
    assert result.status is Status.UNKNOWN
    assert "Unable to contact slurm controller" in result.summary
    assert "the job is not reported as stopped until Slurm answers cleanly" in result.summary
    assert [argv[0] for argv in runner.calls] == ["squeue"]


NODES = '[[check]]\nname = "nodes"\ntype = "nodes"\npartition = ["debug"]\n'


def test_a_drained_node_in_recorded_sinfo_is_a_warning_with_its_reason(tmp_path: Path) -> None:
    runner = Recorded({"sinfo": recording("sinfo-node2-drained.txt")})
    result = run_tick(tmp_path, NODES, runner)["nodes"]
    assert result.status is Status.WARNING and result.fingerprint == "node2"
    assert "node2 drained: bad gpu (by root since" in result.summary
    assert [argv[0] for argv in runner.calls] == ["sinfo"]


def test_all_nodes_idle_in_recorded_sinfo_is_ok(tmp_path: Path) -> None:
    runner = Recorded({"sinfo": recording("sinfo-idle.txt")})
    result = run_tick(tmp_path, NODES, runner)["nodes"]
    assert result.status is Status.OK and result.fingerprint == ""
    assert result.summary.startswith("all usable:")


class ThroughTheRealRunner(Recorded):
    """Recorded bytes, answered by a real child process through `run_slurm` (the boundary
    where Slurm's output is decoded), as a site's wrapper printing them would."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        super().__init__({})
        self.files = dict(files)

    def __call__(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT_S,
                 env: Mapping[str, str] | None = None, input_text: str | None = None) -> SlurmReply:
        from watchdogs.slurmctl.runner import run_slurm

        self.calls.append(tuple(argv))
        reply = run_slurm(["cat", str(self.files[argv[0]])], timeout)
        return SlurmReply(tuple(argv), reply.stdout, reply.stderr)


def test_a_drain_reason_in_bytes_that_are_not_utf8_is_shown_with_the_bytes_visible(tmp_path: Path) -> None:
    """An admin's reason typed in Latin-1 (or with an escape sequence) on a drained node."""
    recorded = (RECORDED / "sinfo-node2-drained.txt").read_bytes()
    sinfo = tmp_path / "sinfo-latin1.txt"
    sinfo.write_bytes(recorded.replace(b"bad gpu", b"caf\xe9 \x1b[2J gpu\xff"))
    result = run_tick(tmp_path, NODES, ThroughTheRealRunner({"sinfo": sinfo}))["nodes"]
    assert result.status is Status.WARNING and result.fingerprint == "node2", result
    assert "node2 drained: caf\\xe9 \\x1b[2J gpu\\xff" in result.summary
    for text in (result.summary, *result.details, *result.context.values()):
        text.encode("utf-8")  # storable: no lone surrogate, no replacement lost the byte
        assert "\ufffd" not in text and "\x1b" not in text
