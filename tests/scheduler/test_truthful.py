"""What the watchdog says is true, against the real command line: `alerts` says "sent" only
of a message a channel accepted (a real HTTP server answering 500), and says when an alert
went nowhere; `validate` warns about alerts with nowhere to go; one secret file others can
read disables that channel alone in `run --once`; a drop-in killed by SIGKILL is UNKNOWN
"killed by signal 9"; `--history` with an absurd number is a clear error."""
from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.scheduler.conftest import Site, script


@pytest.fixture
def http_500() -> Iterator[tuple[str, list[bytes]]]:
    """A real HTTP server that answers every POST with 500; the bodies it received."""
    bodies: list[bytes] = []

    class Failing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            self.send_response(500)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", bodies
    server.shutdown()


def _failing_dropin(site: Site) -> None:
    site.dropin("disk", script("echo disk on fire; exit 2"))


def test_alerts_never_says_sent_when_the_only_channel_answered_500(site: Site, http_500) -> None:
    url, bodies = http_500
    site.write_config(f'[[notify]]\nname = "wh"\ntype = "webhook"\nurl = "{url}"\n')
    _failing_dropin(site)
    site.watchdogs("run", "--once")
    assert bodies, "the webhook was never tried"
    shown = site.watchdogs("alerts")
    assert shown.returncode == 0, shown.stderr
    assert "cron.hourly/disk" in shown.stdout
    assert "last sent" not in shown.stdout and "sent 20" not in shown.stdout
    assert "NOT delivered via wh yet" in shown.stdout and "500" in shown.stdout


def test_alerts_says_when_an_alert_went_nowhere_and_validate_warns(site: Site) -> None:
    _failing_dropin(site)
    assert "no [[notify]] channel: every alert goes nowhere" in site.watchdogs("validate").stderr
    site.watchdogs("run", "--once")
    shown = site.watchdogs("alerts")
    assert "sent nowhere: no channel routes it" in shown.stdout and "last sent" not in shown.stdout


def test_validate_warns_about_a_route_that_leaves_a_severity_without_a_channel(site: Site) -> None:
    site.write_config('[alerts]\nnotify = { critical = ["log"] }\n'
                      '[[notify]]\nname = "log"\ntype = "logfile"\npath = "a.log"\n')
    done = site.watchdogs("validate")
    assert done.returncode == 0
    assert "[alerts] notify names no channel for WARNING: such alerts go nowhere" in done.stderr


def test_one_readable_secret_file_disables_that_channel_alone_in_run_once(site: Site) -> None:
    token = site.root / "token"
    token.write_text("s3cret-token\n")
    token.chmod(0o644)
    site.write_config('[[notify]]\nname = "wh"\ntype = "webhook"\nurl = "http://127.0.0.1:9/x"\n'
                      'token_file = "token"\n'
                      '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n')
    _failing_dropin(site)
    done = site.watchdogs("run", "--once")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "CRITICAL cron.hourly/disk: disk on fire" in done.stdout      # the checks ran
    assert "DISABLED channel wh:" in done.stdout
    told = (site.root / "alerts.log").read_text()
    assert "alert channel wh is disabled" in told and "disk on fire" in told
    assert "s3cret-token" not in done.stdout + done.stderr + told


def test_a_dropin_killed_by_sigkill_is_unknown_killed_by_signal_9_without_a_traceback(site: Site) -> None:
    site.dropin("selfkill", script("echo partial line\nkill -9 $$"))
    done = site.watchdogs("run", "--once")
    assert "UNKNOWN  cron.hourly/selfkill: killed by signal 9 (KILL)" in done.stdout, done.stdout
    logs = "".join(p.read_text() for p in (site.state / "runs").rglob("*") if p.is_file())
    assert "Traceback" not in logs and "Errno 22" not in logs


def test_an_absurd_history_count_is_a_clear_error(site: Site) -> None:
    done = site.watchdogs("alerts", "--history", "99999999999999999999")
    assert done.returncode == 2
    assert "expected a number from 0 to 1,000,000" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
