#!/usr/bin/env python3
"""End to end: from a job's end to the explained alert in a mailbox, through the real
scheduler (`watchdogs run`, foreground), the tick's one squeue and one sacct, and an email
channel to a local aiosmtpd mailbox (notifiers.devmailbox).

SAMPLES jobs are submitted held; each `job` check sees its job queued (OK). Then, one at a
time, a job is released; it runs ~2 s, writes the time of its end (ns) as its last act and
exits 1. The time until the mail explaining it ("failed on nodeN after 2 s: exit 1") is
written to the mailbox is one sample. It is made of the wait for the check's next run
(`every`, here EVERY) and the work of that tick (squeue, sacct, log tail, render, SMTP);
both are reported. There is no alternative to interleave on this cluster: Slurm's own mail
(`--mail-type=END`) has no MailProg here, and many sites turn it off.

    slurm/dev-cluster up
    SLURM_CONF=$WATCHDOGS_CLUSTER_DIR/slurm.conf .venv/bin/python benchmarks/job_end_alert.py
"""
from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _stats import Row, record, spread

SAMPLES, EVERY = 5, 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sbatch(*args: str) -> str:
    return subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True,
                          check=True).stdout.strip().split(";")[0]


def wait_mail(box: Path, pattern: str, timeout: float) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for mail in sorted(box.glob("*.eml")):
            if re.search(pattern, mail.read_text(errors="replace")):
                return mail
        time.sleep(0.05)
    raise SystemExit(f"no mail matching {pattern!r} within {timeout:g}s")


def main() -> None:
    if "SLURM_CONF" not in os.environ:
        sys.exit("set SLURM_CONF to the dev cluster's slurm.conf (slurm/dev-cluster env)")
    site = Path(tempfile.mkdtemp(prefix="wd-e2e-"))
    box, port, prefix = site / "mail", free_port(), f"e2e{os.getpid()}"
    box.mkdir()
    checks = "".join(f'[[check]]\nname = "j{i}"\ntype = "job"\njob_name = "{prefix}-{i}"\n'
                     f'every = "{EVERY}s"\n' for i in range(SAMPLES))
    (site / "watchdogs.toml").write_text(
        f'[scheduler]\nstate_dir = "state"\ntick = "1s"\n{checks}'
        f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {port}\n'
        'sender = "w@example.org"\nto = "ops@example.org"\n')
    jobs = [sbatch("--hold", f"--job-name={prefix}-{i}", f"--output={site}/%x-%j.out", "--wrap",
                   f"sleep 2; date +%s.%N > {site}/end-{i}; exit 1") for i in range(SAMPLES)]
    mailbox = subprocess.Popen([sys.executable, "-m", "notifiers.devmailbox", "--port", str(port),
                                "--dir", str(box)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = open(site / "scheduler.log", "w")  # noqa: SIM115 - closed with the process below
    scheduler = subprocess.Popen([sys.executable, "-m", "watchdogs", "--config", str(site / "watchdogs.toml"),
                                  "run"], stdout=log, stderr=subprocess.STDOUT, cwd=site)
    totals = []
    try:
        time.sleep(EVERY + 3)  # every check has seen its job queued
        for i, job in enumerate(jobs):
            subprocess.run(["scontrol", "release", job], check=True)
            mail = wait_mail(box, rf"\(job {job}\) failed on node\d+ after \d+ s: exit 1", 120)
            end = float((site / f"end-{i}").read_text())
            totals.append(mail.stat().st_mtime - end)
            print(f"job {job}: explained alert in the mailbox {totals[-1]:.2f} s after its end", flush=True)
    finally:
        scheduler.terminate()
        mailbox.terminate()
        subprocess.run(["scancel", *jobs], capture_output=True)
        scheduler.wait(30)
        mailbox.wait(30)
        log.close()
    print(f"\n{SAMPLES} samples, check period every = {EVERY}s; job end -> mail in the mailbox, s:")
    print(f"  min {min(totals):.2f}  median {statistics.median(totals):.2f}  max {max(totals):.2f}")
    print(f"  (the wait for the next run is uniform in 0..{EVERY} s; the rest is the tick's work)")
    record(__file__, [Row(
        f"job end → explained alert in a mailbox (`watchdogs run`, `job` check every {EVERY} s, "
        "email to aiosmtpd)", f"≤ every ({EVERY} s) + one tick",
        "none on this cluster: Slurm's own mail (`--mail-type=END`) has no MailProg",
        spread(totals).fmt(unit=" s") + (f" (samples above {EVERY} s: ends seen before slurmdbd "
                                          "recorded them, explained at the next run)"
                                          if max(totals) > EVERY else ""),
        "SLURM_CONF=... .venv/bin/python benchmarks/job_end_alert.py")])


if __name__ == "__main__":
    main()
