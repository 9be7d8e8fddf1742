"""The alert names the right job (issue 20 item 1), read from the delivered mail and logfile
line: a run that started and ended between two looks, and that the controller has since
forgotten (MinJobAge), is the one reported, and the run before it is listed."""
from __future__ import annotations

import re
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checks.conftest import tick, write_config
from tests.checks.test_job_endings_cluster import HOG, config, plain, submit
from tests.helpers import accounted, job_state, sh, wait_for
from tests.notifiers.fakes import SmtpServer
from watchdogs.alerts import build_sink
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm


@pytest.fixture
def forgetful_controller(slurm_cluster: Path) -> Iterator[None]:
    """MinJobAge=2 for this test, restored after: slurmctld then forgets a finished job
    within about a minute (its purge runs about once a minute), as a busy site's does."""
    original = slurm_cluster.read_text()
    text = re.sub(r"(?m)^MinJobAge=.*$", "", original) + "\nMinJobAge=2\n"
    slurm_cluster.write_text(text)
    subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True)
    try:
        yield
    finally:
        slurm_cluster.write_text(original)
        subprocess.run(["scontrol", "reconfigure"], check=False, capture_output=True)


@pytest.mark.root
def test_a_run_the_controller_forgot_is_reported_not_the_run_before_it(
        forgetful_controller: None, tmp_path: Path) -> None:
    """Root: `scontrol reconfigure` of the dev cluster (to shorten MinJobAge) is the
    administrator's; the watchdog's own calls need nothing special."""
    name = f"wdwrong-{tmp_path.name[-10:]}"
    (tmp_path / "hog.py").write_text(HOG)
    log = tmp_path / "alerts.log"
    with SmtpServer() as smtp:
        cfg = write_config(tmp_path, config(tmp_path, name, output=str(tmp_path / "%x-%j.out"))
                           + textwrap.dedent(f"""
                           [[notify]]
                           name = "mail"
                           type = "email"
                           host = "127.0.0.1"
                           port = {smtp.port}
                           sender = "w@example.org"
                           to = "ops@example.org"
                           [[notify]]
                           name = "file"
                           type = "logfile"
                           path = "{log}"
                           """))
        store = StateStore(cfg.scheduler.state_dir)
        sink = build_sink(cfg, store)

        def look() -> None:
            results, ctx = tick(cfg, store)
            sink.handle([ItemOutcome("train", "check", results["train"], ctx.now, ctx.now)], ctx.now)
            sink.flush(ctx.now, force=True)

        first = submit(name, f"--output={tmp_path}/%x-%j.out", wrap="sleep 5; exit 2")
        second = ""
        try:
            wait_for(lambda: job_state(first) == "RUNNING", timeout=90, what="first run running")
            look()  # the first run is alive at this look
            wait_for(lambda: accounted(first), timeout=90, what="first run failed")
            second = submit(name, "--mem=100M", f"--output={tmp_path}/%x-%j.out",
                            wrap=f"python3 {tmp_path}/hog.py")
            wait_for(lambda: accounted(second), timeout=90, what="second run killed")
            wait_for(lambda: job_state(first) == "" and job_state(second) == "", timeout=180,
                     interval=2.0, what="the controller to forget both runs")
            look()
        finally:
            sh("scancel", first, *([second] if second else []), check=False)
        store.close()
    assert smtp.received, "an alert mail was sent"
    mail = smtp.received[-1].message
    body = plain(mail)
    subject = str(mail["Subject"])
    assert f"job {second}" in subject and f"job {first}" not in subject, subject
    first_line = body.splitlines()[0]
    assert f"{name} (job {second}) ran out of memory" in body, body
    assert f"and 1 earlier run since the last look: job {first} failed" in body, body
    assert "hit its time limit" not in body
    line = log.read_text().splitlines()[-1]
    assert f"{name} (job {second}) ran out of memory" in line, line
    assert f"job {first} failed" in line
    assert first_line.strip(), body


def test_a_training_that_completed_is_a_notice_never_critical(slurm_cluster: Path,
                                                              tmp_path: Path) -> None:
    """Issue 20 item 3: exit 0 (done, finish(), the kill switch) is news, not a failure."""
    name = f"wddone-{tmp_path.name[-10:]}"
    log = tmp_path / "alerts.log"
    with SmtpServer() as smtp:
        cfg = write_config(tmp_path, config(tmp_path, name) + textwrap.dedent(f"""
                           [[notify]]
                           name = "mail"
                           type = "email"
                           host = "127.0.0.1"
                           port = {smtp.port}
                           sender = "w@example.org"
                           to = "ops@example.org"
                           [[notify]]
                           name = "file"
                           type = "logfile"
                           path = "{log}"
                           """))
        store = StateStore(cfg.scheduler.state_dir)
        sink = build_sink(cfg, store)

        def look() -> None:
            results, ctx = tick(cfg, store)
            sink.handle([ItemOutcome("train", "check", results["train"], ctx.now, ctx.now)], ctx.now)
            sink.flush(ctx.now, force=True)

        job = submit(name, "--output=/dev/null", wrap="sleep 4; echo done")
        try:
            wait_for(lambda: job_state(job) == "RUNNING", timeout=90, what="training running")
            look()
            wait_for(lambda: accounted(job), timeout=90, what="training completed")
            look()
            look()  # told once
        finally:
            sh("scancel", job, check=False)
        store.close()
    texts = [plain(m.message) for m in smtp.received]
    assert len(texts) == 1, texts
    assert "CRITICAL" not in texts[0] and "CRITICAL" not in str(smtp.received[0].message["Subject"])
    assert f"{name} (job {job}) completed on node" in texts[0]
    assert "(exit 0: finished, not a failure)" in texts[0]
    assert texts[0].splitlines()[0].startswith("NOTICE train:"), texts[0]
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and " WATCHDOGS NOTICE train " in lines[0], lines
    # Issue 20 item 6: Slurm's cluster name, not the host the tick ran on.
    cluster = re.search(r"(?m)^ClusterName=(\S+)", slurm_cluster.read_text())
    assert cluster is not None
    assert f"[watchdogs {cluster.group(1)}]" in str(smtp.received[0].message["Subject"])
    assert f"[{cluster.group(1)}]" in lines[0]
    if socket.gethostname() != cluster.group(1):
        assert f"[watchdogs {socket.gethostname()}]" not in str(smtp.received[0].message["Subject"])


def test_a_requeue_between_two_looks_is_told_from_accounting(slurm_cluster: Path,
                                                             tmp_path: Path) -> None:
    """Issue 20 item 7: the run starts and is requeued between two looks, and the next look
    sees it running again: one look alone shows only a start; accounting's record of the
    earlier run tells the requeue."""
    name = f"wdrq-{tmp_path.name[-10:]}"
    log = tmp_path / "alerts.log"
    cfg = write_config(tmp_path, config(tmp_path, name, notices=["started", "requeued"])
                       + f'[[notify]]\nname = "file"\ntype = "logfile"\npath = "{log}"\n')
    store = StateStore(cfg.scheduler.state_dir)
    sink = build_sink(cfg, store)

    def look() -> None:
        results, ctx = tick(cfg, store)
        sink.handle([ItemOutcome("train", "check", results["train"], ctx.now, ctx.now)], ctx.now)
        sink.flush(ctx.now, force=True)

    job = submit(name, "--hold", "--output=/dev/null", wrap="sleep 300")
    try:
        look()  # queued
        look()  # the look before: still queued
        sh("scontrol", "release", job)
        wait_for(lambda: job_state(job) == "RUNNING", timeout=90, what="first run")
        sh("scontrol", "requeue", job)
        time.sleep(1.5)  # slurmd refuses a start within the second of the previous run's end

        def running_again() -> bool:
            if job_state(job) == "RUNNING":
                return True
            sh("scontrol", "update", f"JobId={job}", "StartTime=now", check=False)
            return False
        wait_for(running_again, timeout=90, interval=1.0, what="second run")
        wait_for(lambda: "REQUEUED" in sh("sacct", "-n", "-D", "-X", "-j", job, "-o", "State"),
                 timeout=60, what="accounting has the requeued run")
        look()
    finally:
        sh("scancel", job, check=False)
    store.close()
    lines = log.read_text().splitlines()
    said = [line for line in lines if " WATCHDOGS NOTICE train " in line]
    assert any(f"{name} (job {job}) was requeued" in line for line in said), lines
    assert any(f"{name} (job {job}) started on" in line for line in said), lines
