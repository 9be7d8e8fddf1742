"""The demo's loopback mailbox: `python -m notifiers.devmailbox --port P --dir D`."""
from __future__ import annotations

import signal
import subprocess
import sys
from email import message_from_bytes
from email.policy import default as default_policy
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.notifiers.fakes import free_port
from tests.notifiers.support import channel, render


@pytest.mark.timeout(60)
def test_devmailbox_stores_each_message_as_a_file_and_stops_on_sigterm(tmp_path: Path) -> None:
    port, box = free_port(), tmp_path / "mailbox"
    argv = [sys.executable, "-m", "notifiers.devmailbox", "--port", str(port), "--dir", str(box)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        assert "listening on 127.0.0.1" in proc.stdout.readline()
        notifier = channel(tmp_path, f"""
        [[notify]]
        name = "mail"
        type = "email"
        host = "127.0.0.1"
        port = {port}
        sender = "w@example.org"
        to = "ops@example.org"
        """)
        notifier.notify(render(notifier))
        files = wait_for(lambda: sorted(box.glob("*.eml")), timeout=10, interval=0.1, what="a stored message")
        mail = message_from_bytes(files[0].read_bytes(), policy=default_policy)
        assert mail["Subject"].startswith("[watchdogs cl1] CRITICAL: train-job")
        assert "train-job" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
