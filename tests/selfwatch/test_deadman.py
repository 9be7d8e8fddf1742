"""The chain's dead man's switch, against a local HTTP server that answers as healthchecks.io
does: the running scheduler pings /start then the plain URL with a body; a config that
cannot load pings /fail with the reason; secrets never leave in a body; a ping server that
never answers does not hold up the schedule."""
from __future__ import annotations

import time

import pytest

from notifiers.secrets import Secret
from tests.helpers import wait_for
from tests.notifiers.fakes import Blackhole, FakeHTTP
from tests.scheduler.conftest import Site, script
from tests.selfwatch.conftest import ping_id
from watchdogs.scheduler.deadman import DeadMansSwitch
from watchdogs.state import lastgood


def pings(hc: FakeHTTP, path: str) -> list[bytes]:
    return [s.body for s in list(hc.seen) if s.method == "POST" and s.path == path]


@pytest.mark.timeout(60)
def test_running_scheduler_pings_start_then_alive_with_a_body(site: Site, hc: FakeHTTP) -> None:
    check = ping_id()
    site.write_config(f'heartbeat_url = "{hc.url}/ping/{check}"\nheartbeat_every = "1s"')
    proc = site.popen("run")
    try:
        wait_for(lambda: len(pings(hc, f"/ping/{check}")) >= 2, timeout=30, what="two alive pings")
    finally:
        proc.terminate()
        proc.wait(20)
    first = hc.seen[0]
    assert (first.method, first.path) == ("POST", f"/ping/{check}/start")
    assert first.body.startswith(b"watchdogs instance ") and b" starting on " in first.body
    assert first.headers["content-type"] == "text/plain; charset=utf-8"
    alive = pings(hc, f"/ping/{check}")[0].decode()
    assert " alive; channels: none; state directory: ok" in alive


@pytest.mark.timeout(60)
def test_config_that_cannot_load_pings_fail_with_the_reason(site: Site, hc: FakeHTTP) -> None:
    check = ping_id()
    site.write_config(f'heartbeat_url = "{hc.url}/ping/{check}"\nheartbeat_every = "1h"')
    proc = site.popen("run")
    try:
        wait_for(lambda: lastgood.path_in(site.state).exists(), timeout=30, what="the last good copy")
    finally:
        proc.terminate()
        proc.wait(20)
    site.config.write_text(site.config.read_text().replace("[cron]", "[cron"))  # a syntax error
    broken = site.watchdogs("run")
    assert broken.returncode == 2
    assert "Traceback" not in broken.stderr
    body = wait_for(lambda: pings(hc, f"/ping/{check}/fail"), timeout=10, what="a /fail ping")[0].decode()
    assert body.startswith("watchdogs cannot load its config:\n")
    assert f"{site.config}: valid TOML" in body or "Expected ']'" in body


@pytest.mark.timeout(30)
def test_ping_body_never_carries_a_secret(hc: FakeHTTP) -> None:
    token = "xoxb-1234567890-abcdefghij"
    password = Secret("correct-horse-battery-staple", "$SMTP_PASSWORD")
    switch = DeadMansSwitch(f"{hc.url}/ping/abc", secrets=lambda: [password])
    assert switch.fail(f"channel slack: auth failed with {token}; smtp said 535 for "
                       "correct-horse-battery-staple")
    switch.wait()
    body = pings(hc, "/ping/abc/fail")[0].decode()
    assert "correct-horse" not in body and "abcdefghij" not in body
    assert body.count("***") == 2


@pytest.mark.timeout(30)
def test_plain_push_monitors_get_only_plain_pings(hc: FakeHTTP) -> None:
    switch = DeadMansSwitch(f"{hc.url}/api/push/Kx2?status=up", suffixes=False)
    assert not switch.start("starting") and not switch.fail("broken")
    assert switch.alive("fine")
    wait_for(lambda: hc.seen, timeout=10, what="the ping")
    time.sleep(0.2)  # anything else would have come along with it
    assert [(s.method, s.path) for s in hc.seen] == [("POST", "/api/push/Kx2?status=up")]


@pytest.mark.timeout(60)
def test_a_ping_server_that_never_answers_does_not_hold_up_the_schedule(site: Site) -> None:
    marks = site.root / "marks"
    site.dropin("tick", script(f"date +%s.%N >> {marks}\necho 'tick OK'"))
    with Blackhole() as hole:
        site.write_config(f'heartbeat_url = "http://127.0.0.1:{hole.port}/ping/x"\nheartbeat_every = "1s"')
        proc = site.popen("run")
        try:
            wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 4, timeout=30,
                     what="four runs of the drop-in")
        finally:
            asked = time.monotonic()
            proc.terminate()
            proc.wait(30)
            stopped_in = time.monotonic() - asked
    times = [float(t) for t in marks.read_text().split()]
    assert stopped_in < 5.0  # the hung pings do not hold up the exit either
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) < 4.0  # every 2 s, pings hanging
    assert proc.returncode == 0
