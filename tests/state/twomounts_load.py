"""The two-host workload: the scheduler (`watchdogs run`) on mount A, and `status`,
`silence`, `ack` in a loop on mount B for a while, then `stop`; then what went wrong.

Used by tests/state/test_two_mounts.py and benchmarks/two_mounts.py (which also runs it
against the code before the state design, to show that the old design fails it).
"""
from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TICK_S = 5.0
CONFIG = f"""[scheduler]
state_dir = "state"
tick = "{TICK_S:.0f}s"
job_name = "wd-twomounts"
heartbeat_stale = "60s"
[cron]
hourly = "2s"
daily = "1h"
weekly = "7d"
[[notify]]
name = "log"
type = "logfile"
path = "alerts.log"
"""
BAD_LOG = r"Traceback|malformed|disk I/O error|database is locked|crashed|cannot write the state view"
FAILING = "#!/bin/sh\necho 'disk on fire'\nexit 2\n"


@dataclass
class Report:
    seconds: float = 0.0
    rounds: int = 0
    errors: list[str] = field(default_factory=list)
    """Commands that failed (non-zero exit other than status's Nagios codes, a traceback)."""
    queued: list[str] = field(default_factory=list)
    """Changes a command did not see applied."""
    lost: list[str] = field(default_factory=list)
    """Silences said to be made that the state does not hold at the end."""
    stale: list[float] = field(default_factory=list)
    """View ages above two ticks."""
    corrupt: list[str] = field(default_factory=list)
    status_s: list[float] = field(default_factory=list)
    ages: list[float] = field(default_factory=list)
    """How old each `status` said its view (or the heartbeat it read) was."""
    scheduler_errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        times = sorted(self.status_s) or [0.0]
        ages = sorted(self.ages) or [0.0]
        return (f"{self.seconds:.0f}s, {self.rounds} rounds: {len(self.errors)} failed commands, "
                f"{len(self.queued)} not applied, {len(self.lost)} lost silences, {len(self.stale)} stale "
                f"views, {len(self.corrupt)} corruption findings, {len(self.scheduler_errors)} scheduler "
                f"errors; status median {times[len(times) // 2] * 1000:.0f} ms, "
                f"max {times[-1] * 1000:.0f} ms; age of what status showed: "
                f"median {ages[len(ages) // 2]:.0f}s, "
                f"max {ages[-1]:.0f}s (tick {TICK_S:.0f}s)")


def prepare(folder: Path) -> None:
    """The site, written through one mount: config and one drop-in that stays CRITICAL."""
    (folder / "watchdogs.toml").write_text(CONFIG)
    os.chmod(folder / "watchdogs.toml", 0o600)
    hourly = folder / "cron.d" / "cron.hourly"
    hourly.mkdir(parents=True, mode=0o700)
    os.chmod(folder / "cron.d", 0o700)
    (hourly / "fire").write_text(FAILING)
    os.chmod(hourly / "fire", 0o700)


def _cmd(user: list[str], pythonpath: str | None, folder: Path, *args: str) -> list[str]:
    del pythonpath
    return [*user, sys.executable, "-m", "watchdogs", "--config", str(folder / "watchdogs.toml"), *args]


def _env(pythonpath: str | None, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(("SLURM_", "PATH", "LANG", "TZ"))}
    env["HOME"] = str(home)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def run(a: Path, b: Path, seconds: float, user: list[str], home: Path, pythonpath: str | None = None,
        export: Path | None = None) -> Report:
    """`user`: the prefix that runs a command as the ordinary user (e.g. runuser -u wdtest --)."""
    report = Report()
    env = _env(pythonpath, home)
    log = open(a.parent / f"scheduler-{a.name}.log", "w")  # noqa: SIM115 - closed below
    chain = subprocess.Popen(_cmd(user, pythonpath, a, "run"), cwd=a, env=env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    made: list[str] = []
    try:
        _wait_first_alert(b, user, env)
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            report.rounds += 1
            reason = f"round-{report.rounds}"
            t0 = time.monotonic()
            shown = _one(report, user, env, b, "status")
            report.status_s.append(time.monotonic() - t0)
            if shown is not None:
                # The view's age (new design), else the heartbeat's as the database shows it.
                age = (re.search(r"view_age=(\d+)s", shown.stdout)
                       or re.search(r"heartbeat (\d+)s ago", shown.stdout))
                if age is not None:
                    report.ages.append(float(age.group(1)))
                if age is not None and float(age.group(1)) > 2 * TICK_S + 1:
                    report.stale.append(float(age.group(1)))
            done = _one(report, user, env, b, "silence", "cron.hourly/*", "--for", "1h", "--reason", reason)
            if done is not None:
                made.append(reason)
                if "QUEUED" in done.stdout:
                    report.queued.append(f"silence {reason}")
            acked = _one(report, user, env, b, "ack", "cron.hourly/*")
            if acked is not None and "acknowledged" not in acked.stdout:
                report.queued.append(f"ack in {reason}: {acked.stdout.strip()[:200]}")
        report.seconds = time.monotonic() - start
        _one(report, user, env, b, "stop", ok=(0, 3))  # 3: no Slurm to cancel in; the stop file stands
        try:
            chain.wait(timeout=60)
        except subprocess.TimeoutExpired:
            report.errors.append("the scheduler did not stop after `watchdogs stop`")
    finally:
        if chain.poll() is None:
            os.killpg(chain.pid, signal.SIGKILL)
            chain.wait()
        log.close()
    _check_end(report, a, b, user, env, made, export or a)
    return report


def _wait_first_alert(b: Path, user: list[str], env: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = subprocess.run(_cmd(user, None, b, "status"), cwd=b, env=env, capture_output=True, text=True,
                              timeout=60)
        if "CRITICAL" in done.stdout:
            return
        time.sleep(0.5)
    raise AssertionError(f"no open alert after 60 s: {done.stdout}{done.stderr}")


def _one(report: Report, user: list[str], env: dict[str, str], b: Path, *args: str,
         ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str] | None:
    codes = ok if args[0] != "status" else (0, 1, 2, 3)
    try:
        done = subprocess.run(_cmd(user, None, b, *args), cwd=b, env=env, capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        report.errors.append(f"{args[0]}: hung for 120 s")
        return None
    text = done.stdout + done.stderr
    if done.returncode not in codes or "Traceback" in text:
        report.errors.append(f"{args[0]} exit {done.returncode}: {text.strip()[-300:]}")
        if re.search(r"malformed|not a database|corrupt", text):
            report.corrupt.append(f"{args[0]}: {text.strip()[-200:]}")
        return None
    return done


def _check_end(report: Report, a: Path, b: Path, user: list[str], env: dict[str, str], made: list[str],
               export: Path) -> None:
    for host in (a, b):  # what each "host" is told is there, and what the file on the server holds
        listed = subprocess.run(_cmd(user, None, host, "silences", "--all"), cwd=host, env=env,
                                capture_output=True, text=True, timeout=120)
        if listed.returncode != 0:
            report.errors.append(f"silences --all exit {listed.returncode}: {listed.stderr.strip()[-300:]}")
        have = set(re.findall(r"round-\d+", listed.stdout))
        report.lost += [f"{r} (as seen from {host.name})" for r in made if r not in have]
    db = export / "state" / "state.sqlite3"  # on the "server": the file itself
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        have = {str(r[0]) for r in conn.execute("SELECT reason FROM silences")}
        acked = conn.execute("SELECT acked_by FROM alert_state WHERE item = 'cron.hourly/fire'").fetchone()
        conn.close()
        if check != ["ok"]:
            report.corrupt.append(f"integrity_check: {check[:3]}")
        report.lost += [f"{r} (in the file)" for r in made if r not in have]
        if made and (acked is None or not acked[0]):
            report.lost.append("the acks (in the file)")
    except sqlite3.Error as exc:
        report.corrupt.append(f"reading the file on the server: {exc}")
    text = (a.parent / f"scheduler-{a.name}.log").read_text(errors="replace")
    report.scheduler_errors += [line for line in text.splitlines()
                                if re.search(BAD_LOG, line)]
