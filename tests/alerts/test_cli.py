"""The alert commands: silence, silences, ack, alerts, notify-test; and secrets staying out
of every output of a real `run --once` / `status --json` / `alerts --json` / `notify-test`."""
from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.alerts.support import lines, logfile, make_sink, outcome
from tests.notifiers.fakes import FakeHTTP, SmtpServer, free_port
from watchdogs.result import Status


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "watchdogs", "--config", str(cwd / "watchdogs.toml"), *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=60,
                          env={**os.environ, **(env or {})})


def now() -> datetime:
    return datetime.now(timezone.utc)


def test_silence_then_list_then_expire(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, logfile("log"))
    made = cli(tmp_path, "silence", "scratch-*", "--for", "2h", "--reason", "quota raise pending")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("silence 1: 'scratch-*' until ") and "quota raise pending" in made.stdout
    listed = json.loads(cli(tmp_path, "--json", "silences").stdout)["silences"]
    assert [(s["id"], s["pattern"], s["reason"], s["active"]) for s in listed] == [
        (1, "scratch-*", "quota raise pending", True)]
    sink.handle([outcome("scratch-disk", Status.CRITICAL, now())], now())
    sink.flush(now())
    assert lines(tmp_path, "log") == []
    assert cli(tmp_path, "silences", "--expire", "1").stdout.strip() == "silence 1 ended"
    assert cli(tmp_path, "silences").stdout.strip() == "no running silences"
    later = now() + timedelta(seconds=1)
    sink.handle([outcome("scratch-disk", Status.CRITICAL, later)], later)
    sink.flush(later)
    assert len(lines(tmp_path, "log")) == 1 and 'note="a silence ended"' in lines(tmp_path, "log")[0]


def test_ack_stops_reminders_and_alerts_shows_who_acked(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, logfile("log"))
    sink.handle([outcome("train-job", Status.CRITICAL, now())], now())
    sink.flush(now())
    acked = cli(tmp_path, "ack", "train-*")
    assert acked.returncode == 0 and acked.stdout.startswith("acknowledged: train-job")
    later = now() + timedelta(hours=5)
    sink.handle([outcome("train-job", Status.CRITICAL, later)], later)
    sink.flush(later)
    assert len(lines(tmp_path, "log")) == 1
    shown = json.loads(cli(tmp_path, "--json", "alerts").stdout)
    assert [(a["item"], a["status"], a["acked_by"]) for a in shown["open"]] == [
        ("train-job", "CRITICAL", getpass.getuser())]
    text = cli(tmp_path, "alerts").stdout
    assert "CRITICAL train-job" in text and f"acked by {getpass.getuser()}" in text


def test_ack_with_nothing_open_and_a_bad_duration_are_clear_errors(tmp_path: Path) -> None:
    make_sink(tmp_path, logfile("log"))
    nothing = cli(tmp_path, "ack", "train-job")
    assert nothing.returncode == 2
    assert nothing.stderr.strip() == "watchdogs: error: no open alert matches 'train-job' (open alerts: none)"
    bad = cli(tmp_path, "silence", "x", "--for", "soon")
    assert bad.returncode == 2 and "--for 'soon': expected a duration such as" in bad.stderr


def test_notify_test_says_where_it_went_or_exactly_why_not(tmp_path: Path) -> None:
    with SmtpServer() as smtp:
        (tmp_path / "watchdogs.toml").write_text(
            f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {smtp.port}\n'
            'sender = "w@example.org"\nto = "ops@example.org"\n\n'
            f'[[notify]]\nname = "down"\ntype = "email"\nhost = "127.0.0.1"\nport = {free_port()}\n'
            'sender = "w@example.org"\nto = "ops@example.org"\n')
        ok = cli(tmp_path, "notify-test", "mail")
        failed = cli(tmp_path, "--json", "notify-test", "down")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("channel 'mail' (email): delivered in ")
    assert f"email to ops@example.org via smtp://127.0.0.1:{smtp.port}" in ok.stdout
    assert len(smtp.received) == 1 and "notify-test" in smtp.received[0].message["Subject"]
    data = json.loads(failed.stdout)
    assert failed.returncode == 1 and data["delivered"] is False and data["permanent"] is False
    assert "ConnectionRefusedError" in data["error"]


HOOK = "https://hooks.slack.com/services/T0001/B0002/VerySecretHook123"
PASSWORD = "smtp-Pa55word-secret"


@pytest.mark.slurm
@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")  # loopback only
def test_secrets_never_reach_logs_status_alerts_or_notify_test(tmp_path: Path, slurm_cluster: Path) -> None:
    hourly = tmp_path / "cron.d" / "cron.hourly"
    hourly.mkdir(parents=True)
    (hourly / "check_gpu").write_text('#!/bin/sh\necho "GPU ECC errors on node1"\nexit 2\n')
    (hourly / "check_gpu").chmod(0o755)
    (tmp_path / "pw").write_text(PASSWORD)
    (tmp_path / "pw").chmod(0o600)
    with FakeHTTP() as http, SmtpServer(users={"bot": PASSWORD}) as smtp:
        http.default.status, http.default.body = 404, f"no_service: {HOOK}"
        (tmp_path / "watchdogs.toml").write_text(
            '[scheduler]\nstate_dir = "state"\n'
            '[[notify]]\nname = "slack"\ntype = "slack"\nwebhook_url_env = "SLACK_HOOK"\n'
            f'base_url = "{http.url}"\n'
            f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {smtp.port}\n'
            'sender = "w@example.org"\nto = "ops@example.org"\nusername = "bot"\npassword_file = "pw"\n')
        env = {"SLACK_HOOK": HOOK}
        commands = [("-v", "run", "--once"), ("--json", "status"), ("--json", "alerts"),
                    ("-v", "notify-test", "slack"), ("-v", "notify-test", "mail")]
        runs = [cli(tmp_path, *command, env=env) for command in commands]
    assert runs[0].returncode == 2 and "CRITICAL cron.hourly/check_gpu" in runs[0].stdout
    assert json.loads(runs[1].stdout)["alerts"]["failing_channels"] == ["slack"]
    assert [s.path for s in http.seen] == ["/services/T0001/B0002/VerySecretHook123"] * 2
    assert len(smtp.received) == 2 and smtp.received[0].login == "bot"
    everything = "".join(r.stdout + r.stderr for r in runs)
    everything += "".join(p.read_text(errors="replace") for p in (tmp_path / "state").rglob("*.log"))
    assert "HTTP 404" in everything
    for secret in ("VerySecretHook123", "T0001/B0002", PASSWORD):
        assert secret not in everything
