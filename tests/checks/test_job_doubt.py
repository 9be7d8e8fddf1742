"""Never act on doubt (issue 28 item 1): a training that RUNS while the watchdog's look at
the queue is odd (a site's squeue wrapper that warns, a typo in `users`, a listing that
hid the job) is never resubmitted. Exactly one copy of the training remains, and the check
says in words that it cannot tell, never "gone".

Each scenario first leaves an earlier run of the same name FAILED in accounting, so that
without the doubt rule the resubmit policy (failed, fail_fast 0s) would submit a second copy."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checks.conftest import Jobs, tick, write_config
from tests.checks.test_job import one_check, unique
from tests.checks.test_job_endings_cluster import plain
from tests.checks.test_recovery_alerts import mail
from tests.helpers import accounted, job_state, sh, wait_for
from tests.notifiers.fakes import SmtpServer
from watchdogs.alerts import build_sink
from watchdogs.result import Status
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm


def live_copies(name: str) -> list[str]:
    """Every pending or running job of that name, from the real squeue."""
    out = sh("squeue", "--noheader", f"--name={name}", "--states=PENDING,RUNNING,CONFIGURING",
             "-o", "%i")
    return out.split()


def training(tmp_path: Path, jobs: Jobs, tag: str) -> tuple[str, str]:
    """(job name, the running job's id), with an earlier run of that name FAILED and recorded."""
    name = unique(tag, tmp_path)
    failed = jobs.submit(name=name, wrap="exit 3")
    wait_for(lambda: accounted(failed), timeout=90, what="accounting has the failed run")
    running = jobs.submit(name=name)
    wait_for(lambda: job_state(running) == "RUNNING", timeout=90, what="training running")
    return name, running


def wrapper(tmp_path: Path, body: str) -> dict[str, str]:
    """A `squeue` first on PATH, as a site installs one. `body` runs as sh; $REAL is squeue."""
    real = subprocess.run(["which", "squeue"], capture_output=True, text=True, check=True).stdout.strip()
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "squeue").write_text(f'#!/bin/sh\nREAL={real}\n{body}\n')
    (shim / "squeue").chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return {"PATH": f"{shim}:{os.environ['PATH']}"}


def resubmitting(tmp_path: Path, name: str, **extra: str) -> str:
    script = tmp_path / "train.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nsleep 300\n")
    return one_check(tmp_path, "train", job_name=name, resubmit="train.slurm", fail_fast="0s", **extra)


def test_squeue_wrapper_that_prints_a_warning_instead_of_the_listing_is_unknown_not_gone(
        tmp_path: Path, store: StateStore, jobs: Jobs) -> None:
    name, running = training(tmp_path, jobs, "warn")
    env = wrapper(tmp_path, 'echo "squeue: site notice: maintenance Sunday 03:00"\nexit 0')
    config = write_config(tmp_path, resubmitting(tmp_path, name))
    result = tick(config, store, env=env)[0]["train"]
    assert live_copies(name) == [running]
    assert result.status is Status.UNKNOWN, result.summary
    assert "cannot tell whether jobs with name" in result.summary
    assert "squeue printed a line that does not parse: 'squeue: site notice" in result.summary
    assert "gone" not in result.summary
    assert "Resubmitted" not in result.summary


def test_squeue_warning_on_stderr_with_the_listing_is_still_doubt(
        tmp_path: Path, store: StateStore, jobs: Jobs) -> None:
    name, running = training(tmp_path, jobs, "stderr")
    env = wrapper(tmp_path, 'echo "squeue: warning: partial answer from backup" >&2\nexec "$REAL" "$@"')
    config = write_config(tmp_path, resubmitting(tmp_path, name))
    result = tick(config, store, env=env)[0]["train"]
    assert live_copies(name) == [running]
    assert result.status is Status.UNKNOWN
    assert "squeue printed 'squeue: warning: partial answer from backup'" in result.summary


def test_unknown_user_is_unknown_in_words_and_nothing_is_resubmitted(
        tmp_path: Path, store: StateStore, jobs: Jobs) -> None:
    name, running = training(tmp_path, jobs, "typo")
    config = write_config(tmp_path, resubmitting(tmp_path, name, users="nosuchuser"))
    result = tick(config, store)[0]["train"]
    assert live_copies(name) == [running]
    assert result.status is Status.UNKNOWN
    assert result.summary.startswith("Slurm does not know user nosuchuser: cannot tell whether jobs "
                                     f"with name {name!r} of nosuchuser run"), result.summary
    assert "gone" not in result.summary


def test_unknown_user_alert_delivered_says_slurm_does_not_know_and_never_gone(
        tmp_path: Path, jobs: Jobs) -> None:
    """Issue 37 item 3, as delivered: the job check and the checks linked to it (log_stale,
    nodes) mail UNKNOWN with the words, and no subject or body says "gone" (a cut subject
    or an SMS shows only the start of a summary)."""
    name = unique("typomail", tmp_path)
    running = jobs.submit(name=name)
    wait_for(lambda: job_state(running) == "RUNNING", timeout=90, what="training running")
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    os.utime(log, (1, 1))  # stale: the linked log_stale judges it while the job may run
    checks = (f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\nusers = "nosuchuser"\n'
              f'[[check]]\nname = "train-log"\ntype = "log_stale"\njob = "train"\npath = "{log}"\n'
              f'[[check]]\nname = "train-nodes"\ntype = "nodes"\njob = "train"\n')
    with SmtpServer() as smtp:
        cfg = write_config(tmp_path, checks + mail(smtp.port))
        db = StateStore(cfg.scheduler.state_dir)
        try:
            results, ctx = tick(cfg, db)
            sink = build_sink(cfg, db)
            sink.handle([ItemOutcome(n, "check", r, ctx.now, ctx.now) for n, r in results.items()], ctx.now)
            sink.flush(ctx.now)
        finally:
            db.close()
        wait_for(lambda: smtp.received, timeout=30, what="the alert mail")
    assert {n: r.status for n, r in results.items()} == {n: Status.UNKNOWN for n in results}, results
    texts = [m.message["Subject"] + "\n" + plain(m.message) for m in smtp.received]
    flat = " ".join(" ".join(texts).split())
    for check in ("train", "train-log", "train-nodes"):
        assert f"UNKNOWN: {check}" in flat, flat
    assert "Slurm does not know user nosuchuser" in flat, flat
    assert "gone" not in flat.lower(), flat
    assert live_copies(name) == [running]


def test_second_look_before_resubmitting_finds_the_training_and_submits_nothing(
        tmp_path: Path, store: StateStore, jobs: Jobs) -> None:
    """The first listing (clean, but missing the job: a controller that answered from a stale
    view) says gone; the second look, just before sbatch, sees it running."""
    name, running = training(tmp_path, jobs, "second")
    count = tmp_path / "calls"
    env = wrapper(tmp_path, f'echo x >> {count}\n'
                            f'if [ "$(wc -l < {count})" -eq 1 ]; then exit 0; fi\nexec "$REAL" "$@"')
    config = write_config(tmp_path, resubmitting(tmp_path, name))
    result = tick(config, store, env=env)[0]["train"]
    assert live_copies(name) == [running]
    assert result.status is Status.UNKNOWN, result.summary
    assert f"a second look at the queue lists it again (job {running} RUNNING)" in result.summary
    assert "Not resubmitted" in result.summary


def test_no_accounting_record_of_the_end_means_no_resubmit(
        tmp_path: Path, store: StateStore, jobs: Jobs) -> None:
    """A job never seen and unknown to accounting: nothing shows a run ended, so nothing is
    started (before, the first tick submitted it)."""
    name = unique("noevid", tmp_path)
    config = write_config(tmp_path, resubmitting(tmp_path, name))
    result = tick(config, store)[0]["train"]
    assert live_copies(name) == []
    assert result.status is Status.CRITICAL
    assert "Not resubmitted: no accounting record shows that a run of it ended" in result.summary


def test_validate_refuses_a_user_or_group_that_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "watchdogs.toml"
    path.write_text('[scheduler]\nstate_dir = "state"\n'
                    '[[check]]\nname = "train"\ntype = "job"\njob_name = "t"\n'
                    'users = ["nosuchuser", "@nosuchgroup", "root"]\n')
    out = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(path), "validate"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert f"{path}: check \"train\": key 'users'" in text
    assert "Slurm does not know user nosuchuser (no such user 'nosuchuser' on this host)" in text
    assert "no such Unix group 'nosuchgroup'" in text
