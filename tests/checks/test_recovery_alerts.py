"""The run's recovery record in the `job` check's alerts, on the real dev cluster with a real
mailbox: an in-place restart (no job state change) is told once, naming the suspect node and
what was done; a restart storm ends the chain with one page listing every restart and no
resubmission; the resubmit excludes the run's suspects unless that leaves too few nodes; a
node drained under the running job becomes its suspect.

The in-place restarts are driven through `python -m trainguard.recovery` as the batch
templates call it (the templates themselves are tested with the restart in
tests/trainguard)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.checks.conftest import Jobs, tick, write_config
from tests.checks.test_job_endings_cluster import notice_lines, plain
from tests.helpers import accounted, admin_scontrol, job_state, sh, wait_for
from tests.notifiers.fakes import SmtpServer
from trainguard.recovery import journal, suspects
from watchdogs.alerts import build_sink
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm


def recovery(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a job calls it: trainguard's defaults, and `env`'s settings."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRAINGUARD_")}
    return subprocess.run([sys.executable, "-m", "trainguard.recovery", *args], capture_output=True,
                          text=True, timeout=60, env={**base, **(env or {})})


def check(name: str, run: Path, **opts: object) -> str:
    keys = "".join(f"{k} = {json.dumps(v)}\n" for k, v in opts.items())
    return f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\nrun_dir = "{run}"\n{keys}'


def mail(port: int) -> str:
    return textwrap.dedent(f"""
        [[notify]]
        name = "mail"
        type = "email"
        host = "127.0.0.1"
        port = {port}
        sender = "w@example.org"
        to = "ops@example.org"
        """)


@pytest.fixture
def looks(tmp_path: Path) -> Iterator[Callable[[str], Callable[[], CheckResult]]]:
    """A watchdog over a config body: each call of the returned function is one tick whose
    outcome goes through the real alert sink (and its channels)."""
    stores: list[StateStore] = []

    def make(body: str) -> Callable[[], CheckResult]:
        cfg = write_config(tmp_path, body)
        store = StateStore(cfg.scheduler.state_dir)
        stores.append(store)
        sink = build_sink(cfg, store)

        def look() -> CheckResult:
            results, ctx = tick(cfg, store)
            sink.handle([ItemOutcome("train", "check", results["train"], ctx.now, ctx.now)], ctx.now)
            sink.flush(ctx.now)
            return results["train"]
        return look
    yield make
    for s in stores:
        s.close()


def test_an_in_place_restart_is_told_once_with_the_suspect_and_what_was_done(
        jobs: Jobs, looks: Callable[[str], Callable[[], CheckResult]], tmp_path: Path) -> None:
    name, run = f"wdrec-inplace-{os.getpid()}", tmp_path / "run"
    job = jobs.submit(name=name)
    wait_for(lambda: job_state(job) == "RUNNING", timeout=60, what="job running")
    with SmtpServer() as smtp:
        look = looks(check(name, run) + mail(smtp.port))
        look()
        recovery("note", "--run-dir", str(run), "--job", job, "--cause", "hang", "--nodes", "node2",
                 "--step", "41200", "--detail", "rank 3, in all_reduce")
        recovery("plan", "--run-dir", str(run), "--allocation", "node[1-3]", "--need", "2", "--job", job)
        assert recovery("restart", "--run-dir", str(run), "--job", job, "--kind", "inplace", "--cause",
                        "hang", "--node", "node2", "--step", "41000").returncode == 0
        look()
        look()   # nothing new: no second notice
        recovery("restart", "--run-dir", str(run), "--job", job, "--kind", "inplace", "--cause", "hang",
                 "--step", "41500")
        look()
        # No spare left: the template requeues the job, and that is told with what was done.
        recovery("note", "--run-dir", str(run), "--job", job, "--cause", "rank_died", "--nodes", "node3",
                 "--step", "41700", "--detail", "rank 1, signal 9")
        recovery("exclude", "--run-dir", str(run), "--partition", "debug", "--need", "1", "--job", job)
        recovery("restart", "--run-dir", str(run), "--job", job, "--kind", "requeue", "--cause",
                 "rank_died", "--node", "node3", "--step", "41500")
        look()
    notices = [n for m in smtp.received for n in notice_lines(plain(m.message))]
    assert len(notices) == 3, notices
    assert notices[0].startswith(f"{name} (job {job}) restarted in place: node2 stopped the run at step "
                                 "41,200 (rank 3, in all_reduce); node2 excluded; training resumed at ")
    assert "on node1,node3 from step 41,000" in notices[0] and notices[0].endswith("0 spares left")
    assert "from step 41,500" in notices[1]
    assert notices[2].startswith(f"{name} (job {job}) requeued by its batch script: a rank on node3 "
                                 "died at step 41,700 (rank 1, signal 9); node2 excluded; job ")
    assert "requeued at " in notices[2] and ", to resume from step 41,500" in notices[2]


def test_a_restart_storm_ends_the_chain_with_one_page_listing_the_restarts(
        jobs: Jobs, looks: Callable[[str], Callable[[], CheckResult]], tmp_path: Path) -> None:
    name, run = f"wdrec-storm-{os.getpid()}", tmp_path / "run"
    script = tmp_path / "train.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nsleep 300\n")
    # The job restarts in place five times in a row, as a template would, and ends with the
    # code the fifth `restart` returns.
    restart = (f"{sys.executable} -m trainguard.recovery restart --run-dir {run} --job $SLURM_JOB_ID "
               "--kind inplace --cause hang --node node1")
    job = jobs.submit(name=name, wrap=f"for s in 0 100 200 300 400; do {restart} --step $s || exit $?; done")
    wait_for(lambda: accounted(job), timeout=90, what="accounting has the storm's end")
    with SmtpServer() as smtp:
        look = looks(check(name, run, resubmit=str(script), fail_fast="0s") + mail(smtp.port))
        result = look()
    assert sh("sacct", "-n", "-X", "-j", job, "-o", "ExitCode").split() == ["6:0"]
    assert result.status is Status.CRITICAL
    assert sh("squeue", "-h", "--name", name, "-o", "%i").split() == []   # nothing resubmitted
    text, = [plain(m.message) for m in smtp.received]
    assert "Not resubmitted: the run ended its chain on purpose after a restart storm " \
           "(5 restarts in 30 min)" in text
    assert "restart storm: 5 restarts in 30 min; the chain was ended on purpose" in text
    history = [line for line in text.splitlines() if "inplace  hang" in line]
    assert len(history) == 5 and all("node node1" in h and f"(job {job})" in h for h in history), text
    assert [h.split("from step ")[1].split()[0] for h in history] == ["0", "100", "200", "300", "400"]


def test_the_resubmit_excludes_the_runs_suspects_unless_too_few_nodes_would_be_left(
        jobs: Jobs, looks: Callable[[str], Callable[[], CheckResult]], tmp_path: Path) -> None:
    """`debug` holds node1 and node2."""
    name, run = f"wdrec-resub-{os.getpid()}", tmp_path / "run"
    script = tmp_path / "train.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\n#SBATCH --partition=debug\nexit 1\n")
    recovery("note", "--run-dir", str(run), "--job", "1", "--cause", "hang", "--nodes", "node2",
             "--step", "7")
    first = jobs.submit("--partition=debug", name=name, wrap="exit 1")
    wait_for(lambda: accounted(first), timeout=90, what="accounting has the first run's end")
    look = looks(check(name, run, resubmit=str(script), fail_fast="0s"))
    result = look()
    again = result.context["resubmitted"]
    jobs.ids.append(again)
    assert f"Resubmitted as job {again} excluding node2" in result.summary
    assert "suspect nodes excluded: node2: hang at step 7" in result.details
    assert "ExcNodeList=node2" in sh("scontrol", "show", "job", again)
    said = [e.fields["summary"] for e in journal.read(run).of("restart")]
    assert said == [f"the run stopped (failed); node2 excluded; job {first} resubmitted at "
                    + said[0].split(" resubmitted at ")[1]]
    # node1 too: excluding both would leave the partition no node at all.
    suspects.record(run, suspects.Suspicion("node1", "hang", __import__("time").time(), "2", 9))
    wait_for(lambda: accounted(again), timeout=90, what="accounting has the second run's end")
    result = look()
    third = result.context["resubmitted"]
    jobs.ids.append(third)
    assert f"Resubmitted as job {third} (" in result.summary
    assert "not excluding node1, node2: that would leave 0 usable nodes in the partition, and the " \
           "job needs 1" in result.details
    assert "ExcNodeList=(null)" in sh("scontrol", "show", "job", third)


def test_a_resubmit_that_would_make_a_storm_is_not_submitted_and_the_page_lists_the_restarts(
        jobs: Jobs, looks: Callable[[str], Callable[[], CheckResult]], tmp_path: Path) -> None:
    name, run = f"wdrec-stormsub-{os.getpid()}", tmp_path / "run"
    script = tmp_path / "train.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nexit 1\n")
    for step in (100, 200, 300, 400):   # four requeues by the template, in the last minutes
        assert recovery("restart", "--run-dir", str(run), "--job", "1", "--kind", "requeue", "--cause",
                        "rank_died", "--node", "node2", "--step", str(step)).returncode == 0
    job = jobs.submit(name=name, wrap="exit 1")
    wait_for(lambda: accounted(job), timeout=90, what="accounting has the run's end")
    with SmtpServer() as smtp:
        look = looks(check(name, run, resubmit=str(script), fail_fast="0s") + mail(smtp.port))
        result = look()
        look()   # the same alert: not sent again
    assert result.status is Status.CRITICAL and "resubmitted" not in result.context
    assert "Not resubmitted: it would be a restart storm (5 restarts in 30 min); the chain ends here" \
        in result.summary
    assert sh("squeue", "-h", "--name", name, "-o", "%i").split() == []
    text, = [plain(m.message) for m in smtp.received]
    # The page's lines (the four requeues also arrive as notices, in the same mail).
    history = [line.strip() for line in text.splitlines()
               if re.match(r"\s*\|\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ", line)]
    assert len(history) == 5, text
    assert "requeue  rank_died  node node2" in history[0] and history[-1].endswith(f"from step - (job {job})")


def test_a_node_drained_under_the_running_job_becomes_its_suspect(
        jobs: Jobs, looks: Callable[[str], Callable[[], CheckResult]], tmp_path: Path) -> None:
    name, run = f"wdrec-drain-{os.getpid()}", tmp_path / "run"
    job = jobs.submit("--partition=debug", name=name)
    wait_for(lambda: job_state(job) == "RUNNING", timeout=60, what="job running")
    node = sh("squeue", "-h", "-j", job, "-o", "%N").strip()
    look = looks(check(name, run))
    admin_scontrol("update", f"NodeName={node}", "State=DRAIN", "Reason=ecc errors")
    try:
        look()
        look()   # recorded once
    finally:
        admin_scontrol("update", f"NodeName={node}", "State=RESUME")
    found, problems = suspects.read(run)
    assert problems == ()
    assert [(s.node, s.cause, s.job, s.detail) for s in found] == [
        (node, "drained", job, "drained while the job ran: ecc errors")]


def test_the_resubmit_is_judged_by_the_storm_policy_the_job_ran_with_not_the_watchdogs(
        jobs: Jobs, looks: Callable[[str], Callable[[], CheckResult]], tmp_path: Path) -> None:
    """The job allowed 3 restarts in 30 min (the default is 5): two in-place restarts and a
    resubmit make a storm by its rule, which the watchdog (defaults in its environment)
    applies."""
    name, run = f"wdrec-policy-{os.getpid()}", tmp_path / "run"
    script = tmp_path / "train.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nexit 1\n")
    for step in (100, 200):
        assert recovery("restart", "--run-dir", str(run), "--job", "1", "--kind", "inplace", "--cause",
                        "rank_died", "--node", "node2", "--step", str(step),
                        env={"TRAINGUARD_STORM_RESTARTS": "3"}).returncode == 0
    job = jobs.submit(name=name, wrap="exit 1")
    wait_for(lambda: accounted(job), timeout=90, what="accounting has the run's end")
    with SmtpServer() as smtp:
        look = looks(check(name, run, resubmit=str(script), fail_fast="0s") + mail(smtp.port))
        result = look()
    assert "resubmitted" not in result.context, result.summary
    assert sh("squeue", "-h", "--name", name, "-o", "%i").split() == []
    text, = [plain(m.message) for m in smtp.received]
    assert "Not resubmitted: it would be a restart storm (3 restarts in 30 min)" in text, text
    assert "recovery policy:" not in text


def test_a_record_without_a_policy_is_judged_by_the_defaults_and_the_alert_says_so(
        jobs: Jobs, looks: Callable[[str], Callable[[], CheckResult]], tmp_path: Path) -> None:
    name, run = f"wdrec-nopolicy-{os.getpid()}", tmp_path / "run"
    # As an older trainguard wrote it: a suspicion with no policy beside it.
    suspects.record(run, suspects.Suspicion("node2", "hang", __import__("time").time(), "1", 7))
    job = jobs.submit(name=name, wrap="exit 1")
    wait_for(lambda: accounted(job), timeout=90, what="accounting has the run's end")
    with SmtpServer() as smtp:
        look = looks(check(name, run) + mail(smtp.port))
        look()
    text, = [plain(m.message) for m in smtp.received]
    assert "suspect nodes (excluded from the next start): node2: hang at step 7" in " ".join(text.split())
    assert "recovery policy: the record names no policy (written by an older trainguard): judged " \
           "by trainguard's defaults" in " ".join(text.split()).replace("| ", ""), text
