"""Delivery guarantees with a real SMTP server: down then up, and kill -9 of the process
between enqueue and send, or in the middle of a send, then a restart: exactly one message."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.alerts.support import at, make_sink, outbox, outcome
from tests.helpers import wait_for
from tests.notifiers.fakes import Blackhole, SmtpServer, free_port
from watchdogs.result import Status
from watchdogs.state.store import StateStore

DRIVER = Path(__file__).with_name("crash_driver.py")


def email(port: int, timeout: str = "2s") -> str:
    return (f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {port}\n'
            f'sender = "w@example.org"\nto = "ops@example.org"\ntimeout = "{timeout}"\n')


def test_smtp_down_then_up_delivers_the_queued_alert_exactly_once(tmp_path: Path) -> None:
    port = free_port()
    sink = make_sink(tmp_path, email(port))
    sink.handle([outcome("train-job", Status.CRITICAL, at(0))], at(0))
    sink.flush(at(0))
    assert outbox(sink, pending_only=True)[0]["attempts"] == 1
    with SmtpServer(port) as smtp:
        sink.flush(at(0.2))  # still backing off
        assert smtp.received == []
        sink.flush(at(1))
        sink.flush(at(2))
        sink.flush(at(3), force=True)
    assert len(smtp.received) == 1
    assert "train-job" in smtp.received[0].message["Subject"]
    assert outbox(sink)[0]["delivered"] is not None


def write_config(tmp_path: Path, port: int, timeout: str = "2s") -> Path:
    path = tmp_path / "watchdogs.toml"
    path.write_text('[scheduler]\nstate_dir = "state"\n' + email(port, timeout))
    return path


def driver(config: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(DRIVER), str(config), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def kill_9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL


def restart(config: Path) -> None:
    done = subprocess.run([sys.executable, str(DRIVER), str(config), "restart"], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == "flushed", done.stderr


def pending(tmp_path: Path) -> list[dict[str, object]]:
    db = StateStore(tmp_path / "state").connection()
    return [dict(r) for r in db.execute("SELECT * FROM outbox WHERE delivered IS NULL")]


@pytest.mark.timeout(60)
def test_kill_9_between_enqueue_and_send_then_restart_delivers_once(tmp_path: Path) -> None:
    with SmtpServer() as smtp:
        config = write_config(tmp_path, smtp.port)
        proc = driver(config, "tick")
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "enqueued"
        finally:
            kill_9(proc)
        assert smtp.received == []
        [queued] = pending(tmp_path)
        assert queued["attempts"] == 0 and "job 4242 FAILED" in str(queued["message"])
        restart(config)
        restart(config)
    assert len(smtp.received) == 1 and "train-job" in smtp.received[0].message["Subject"]
    assert pending(tmp_path) == []


@pytest.mark.timeout(90)
def test_kill_9_in_the_middle_of_a_send_then_restart_delivers_once(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, port, timeout="2s")
    with Blackhole(port) as hole:
        proc = driver(config, "tick-send")
        try:
            wait_for(lambda: hole.accepted, timeout=30, interval=0.02, what="the SMTP connection")
        finally:
            kill_9(proc)
    with SmtpServer(port) as smtp:
        restart(config)  # the dead sender's lease still holds: a second sender must not race it
        assert smtp.received == [] and len(pending(tmp_path)) == 1
        lease_until = float(pending(tmp_path)[0]["lease_until"])  # type: ignore[arg-type]  # why: lease_until is a REAL column
        time.sleep(max(0.0, lease_until - time.time()) + 0.2)
        restart(config)
        restart(config)
    assert len(smtp.received) == 1 and pending(tmp_path) == []
