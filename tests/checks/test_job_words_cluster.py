"""What the reader of the delivered message sees (issue 20), on the real dev cluster with
slurmdbd, a real training (slurm/train-requeue.slurm running slurm/train_tiny.py), the demo's
mailbox (.eml files) and a logfile channel:

- a training stopped by trainguard's kill switch and one that finished are told apart: "was
  stopped by the kill switch at step N, not requeued" and "completed at step N"; one that found
  the kill switch at its start "was stopped by trainguard before its first step";
- a job killed at its time limit with a log longer than `tail_lines` shows the newest lines,
  says at the top what was cut, and ends with Slurm's `CANCELLED ... DUE TO TIME LIMIT`.

Every job is submitted when the module starts, so the time limit's minute overlaps with the
trainings."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy
from pathlib import Path

import pytest

from tests.checks.conftest import tick, write_config
from tests.helpers import accounted, job_state, wait_for
from tests.notifiers.fakes import free_port
from tests.trainguard.support import REQUEUE_SCRIPT, Cluster, wait_for_step
from watchdogs.alerts import build_sink
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm
LOG_LINES = 60


@dataclass
class Runs:
    folder: Path
    prefix: str
    ids: dict[str, str]
    kill_step: int


def _run_dir(folder: Path, key: str) -> Path:
    return folder / f"run-{key}"


def _train(cluster: Cluster, folder: Path, name: str, key: str, *args: str) -> str:
    return cluster.sbatch(REQUEUE_SCRIPT, *args, "--step-log", str(folder / f"steps-{key}"),
                          sbatch_args=(f"--job-name={name}", "-o", str(folder / f"{key}.out")),
                          env={"RUN_DIR": str(_run_dir(folder, key))})


@pytest.fixture(scope="module")
def runs(slurm_cluster: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    folder = tmp_path_factory.mktemp("words")
    prefix = f"wdwords{os.getpid()}"
    cluster = Cluster()
    # The time limit: LOG_LINES numbered lines, then Slurm's own last line at the limit.
    lines = f"for i in $(seq 1 {LOG_LINES}); do echo \"training line $i of {LOG_LINES}\"; done; sleep 300"
    ids = {"timeout": cluster.sbatch(None, sbatch_args=(
        f"--job-name={prefix}-timeout", "--time=1", f"--output={folder}/timeout-%j.out",
        "--wrap", lines))}
    try:
        ids["kill"] = _train(cluster, folder, f"{prefix}-kill", "kill", "--steps", "100000",
                             "--step-sleep", "0.05")
        ids["finish"] = _train(cluster, folder, f"{prefix}-finish", "finish", "--steps", "30")
        # The kill switch already there when the run starts: it never trains.
        _run_dir(folder, "early").mkdir()
        (_run_dir(folder, "early") / "KILL").touch()
        ids["early"] = _train(cluster, folder, f"{prefix}-early", "early", "--steps", "30")
        wait_for_step(folder / "steps-kill", 20, timeout=120)
        (_run_dir(folder, "kill") / "KILL").touch()
        for key in ("kill", "finish", "early"):
            cluster.wait_state(ids[key], ("COMPLETED",), timeout=120)
        said = re.search(r"stopping after step (\d+): kill_switch", (folder / "kill.out").read_text())
        assert said, (folder / "kill.out").read_text()
        yield Runs(folder, prefix, ids, int(said[1]))
    finally:
        cluster.cleanup()


@pytest.fixture
def mailbox(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The demo's loopback mailbox (python -m notifiers.devmailbox): one .eml file a message."""
    port, box = free_port(), tmp_path / "mailbox"
    proc = subprocess.Popen([sys.executable, "-m", "notifiers.devmailbox", "--port", str(port),
                             "--dir", str(box), "--quiet"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "listening" in proc.stdout.readline()
        yield port, box
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def deliver(tmp_path: Path, port: int, checks: str) -> None:
    """One tick of `checks`, delivered by email and to a logfile, as the scheduler does."""
    cfg = write_config(tmp_path, checks + f"""
[[notify]]
name = "mail"
type = "email"
host = "127.0.0.1"
port = {port}
sender = "w@example.org"
to = "ops@example.org"
[[notify]]
name = "log"
type = "logfile"
path = "{tmp_path / 'alerts.log'}"
""")
    store = StateStore(cfg.scheduler.state_dir)
    try:
        sink = build_sink(cfg, store)
        results, ctx = tick(cfg, store)
        sink.handle([ItemOutcome(name, "check", result, ctx.now, ctx.now)
                     for name, result in results.items()], ctx.now)
        sink.flush(ctx.now)
    finally:
        store.close()


def mails(box: Path, count: int) -> list[EmailMessage]:
    files = wait_for(lambda: (f := sorted(box.glob("*.eml"))) and len(f) >= count and f,
                     timeout=30, interval=0.2, what=f"{count} delivered message(s)")
    return [message_from_bytes(f.read_bytes(), policy=default_policy) for f in files]  # type: ignore[misc]  # default_policy gives EmailMessage


def plain(message: EmailMessage) -> str:
    body = message.get_body(("plain",))
    assert body is not None, "every alert mail has a plain-text part"
    return str(body.get_content())


def job_check(name: str, job_name: str, **keys: str) -> str:
    extra = "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    return f'[[check]]\nname = "{name}"\ntype = "job"\njob_name = "{job_name}"\n{extra}'


@pytest.mark.timeout(360)
def test_a_kill_switch_stop_and_a_finished_training_are_told_apart_in_the_mail_and_the_log(
        runs: Runs, tmp_path: Path, mailbox: tuple[int, Path]) -> None:
    kill, finish, early = runs.ids["kill"], runs.ids["finish"], runs.ids["early"]
    wait_for(lambda: accounted(kill) and accounted(finish) and accounted(early), timeout=60,
             what="accounting has the three ends")
    port, box = mailbox
    deliver(tmp_path, port, job_check("stopped", f"{runs.prefix}-kill",
                                      heartbeats=str(_run_dir(runs.folder, "kill") / "heartbeat"))
            + job_check("finished", f"{runs.prefix}-finish",
                        heartbeats=str(_run_dir(runs.folder, "finish") / "heartbeat"))
            + job_check("early", f"{runs.prefix}-early",
                        heartbeats=str(_run_dir(runs.folder, "early") / "heartbeat")))
    texts = "\n".join(plain(m) for m in mails(box, 1))
    stopped = (f"{runs.prefix}-kill (job {kill}) was stopped by the kill switch at step "
               f"{runs.kill_step}, not requeued")
    finished = f"{runs.prefix}-finish (job {finish}) completed at step 29"
    never = (f"{runs.prefix}-early (job {early}) was stopped by trainguard before its first step, "
             "not requeued")
    assert stopped in texts and finished in texts and never in texts, texts
    assert f"(job {kill}) completed" not in texts and "CRITICAL" not in texts
    log = (tmp_path / "alerts.log").read_text()
    assert re.search(rf"WATCHDOGS NOTICE stopped \[\w+\] {re.escape(stopped)}", log), log
    assert re.search(rf"WATCHDOGS NOTICE finished \[\w+\] {re.escape(finished)}", log), log


@pytest.mark.timeout(360)
def test_a_time_limit_mail_shows_the_newest_log_lines_says_what_was_cut_and_ends_with_slurms_line(
        runs: Runs, tmp_path: Path, mailbox: tuple[int, Path]) -> None:
    job = runs.ids["timeout"]
    wait_for(lambda: job_state(job) == "TIMEOUT" and accounted(job), timeout=180, interval=2,
             what="accounting has the time limit")
    written = [ln.strip() for ln in (runs.folder / f"timeout-{job}.out").read_text().splitlines()
               if ln.strip()]
    slurm_line = next(ln for ln in written if "DUE TO TIME LIMIT" in ln)
    port, box = mailbox
    # The log as the user names it to the check: sbatch's --output pattern.
    deliver(tmp_path, port, job_check("train", f"{runs.prefix}-timeout",
                                      output=f"{runs.folder}/timeout-%j.out"))
    (mail,) = mails(box, 1)
    text = plain(mail)
    assert mail["Subject"].startswith("[watchdogs ") and "CRITICAL" in mail["Subject"]
    assert f"{runs.prefix}-timeout" in mail["Subject"] and f"job {job}" in mail["Subject"]
    body = [ln.strip().lstrip("| ") for ln in text.splitlines()]
    # The top of the log says what was cut: 20 lines are shown (tail_lines' default) of the
    # LOG_LINES, Slurm's line and, when bash reports its killed child, "Terminated".
    top = f"last lines of {runs.folder}/timeout-{job}.out ({len(written) - 20} older lines not shown):"
    assert top in body, text
    shown = body[body.index(top) + 1:body.index(top) + 21]
    assert shown == written[-20:], text
    assert slurm_line in shown and f"training line {LOG_LINES} of {LOG_LINES}" in shown, text
    assert not any(ln == f"training line 1 of {LOG_LINES}" for ln in body), text
    # `next:` still names the log itself, without the note.
    assert f"next:  tail -n 50 {runs.folder}/timeout-{job}.out " in text, text
    log = (tmp_path / "alerts.log").read_text()
    assert f'log_end="{written[-1]}"' in log, log  # the log's own last line
