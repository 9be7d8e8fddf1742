"""Time from "the chain cannot run" to a message reaching a person, per failure.

Each sample runs the real `watchdogs run` (the scheduler process a chain instance runs)
against a real SMTP server (aiosmtpd) and a local HTTP server standing for healthchecks.io,
and measures from the moment of the failure to the moment the message arrived there:

  config    the config has a TOML syntax error when an instance starts (t0: process start;
            the running instance keeps its config until the chain's next instance)
  channel   one channel's secret file is 0644 when an instance starts (t0: process start;
            the news arrives on the other channel)
  disk      the state directory's filesystem (a real 2 MiB tmpfs) fills up under a
            running scheduler (t0: dd has filled it)
  corrupt   the state database is a file of garbage when an instance starts (t0: start)
  deadman   the config cannot load (t0: process start) -> the /fail ping that makes
            healthchecks.io page at once; and for a chain killed outright (kill -9), the
            largest gap between "alive" pings seen, which with the service's grace time
            is how late it pages

The scenarios are interleaved (config, channel, disk, corrupt, deadman, config, ...). The
alternative a user has today is no message at all (main: silence, or a crash loop), so
there is no second column: a missing figure there would be "never".

    .venv/bin/python benchmarks/selfwatch_latency.py [--repeat 5]      # as root (tmpfs)
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.notifiers.fakes

from _stats import Row, record, spread

from tests.notifiers.fakes import FakeHTTP, SmtpServer

TIMEOUT_S = 60.0


class Site:
    def __init__(self, root: Path, smtp: SmtpServer, hc: FakeHTTP, state: Path | None = None,
                 extra: str = "", tables: str = "") -> None:
        self.root = root
        self.state = state or root / "state"
        (root / "cron.d").mkdir(parents=True, mode=0o700)
        self.config = root / "watchdogs.toml"
        self.ping = f"/ping/{uuid.uuid4()}"
        self.config.write_text(
            f'[scheduler]\nstate_dir = "{self.state}"\ntick = "1s"\nheartbeat_url = "{hc.url}{self.ping}"\n'
            f'heartbeat_every = "1s"\n{extra}\n'
            f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {smtp.port}\n'
            f'sender = "w@example.org"\nto = ["oncall@example.org"]\nhtml = false\n{tables}')

    def popen(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, "WATCHDOGS_CONFIG": str(self.config)}
        log = open(self.root / "scheduler.log", "ab")  # noqa: SIM115 - closed with the process
        return subprocess.Popen([sys.executable, "-m", "watchdogs", "run"], stdout=log,
                                stderr=subprocess.STDOUT, env=env, cwd=self.root)

    def run_until(self, ready: Callable[[], bool]) -> None:
        proc = self.popen()
        try:
            wait(ready)
        finally:
            stop(proc)


def wait(ready: Callable[[], object], timeout: float = TIMEOUT_S) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return time.monotonic()
        time.sleep(0.005)
    raise TimeoutError("no message within the timeout")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def mail_count(smtp: SmtpServer, words: str) -> int:
    return sum(words in r.data.decode(errors="replace") for r in smtp.received)


def healthy_once(site: Site) -> None:
    """A scheduler that ran, kept its last good config, and stopped."""
    site.run_until(lambda: "scheduling " in (site.root / "scheduler.log").read_text())


def config_broken(root: Path, smtp: SmtpServer, hc: FakeHTTP) -> float:
    site = Site(root, smtp, hc)
    healthy_once(site)
    site.config.write_text(site.config.read_text().replace('tick = "1s"', 'tick = "1s'))
    before = mail_count(smtp, "cannot load its config")
    t0 = time.monotonic()
    proc = site.popen()
    try:
        return wait(lambda: mail_count(smtp, "cannot load its config") > before) - t0
    finally:
        stop(proc)


def channel_broken(root: Path, smtp: SmtpServer, hc: FakeHTTP) -> float:
    token = root / "token"
    root.mkdir(parents=True)
    token.write_text("secret-token\n")
    token.chmod(0o644)
    site = Site(root / "site", smtp, hc, tables=f'[[notify]]\nname = "pager"\ntype = "webhook"\n'
                                                 f'url = "http://127.0.0.1:9/x"\ntoken_file = "{token}"\n')
    before = mail_count(smtp, "alert channel pager is disabled")
    t0 = time.monotonic()
    proc = site.popen()
    try:
        return wait(lambda: mail_count(smtp, "alert channel pager is disabled") > before) - t0
    finally:
        stop(proc)


def disk_full(root: Path, smtp: SmtpServer, hc: FakeHTTP) -> float:
    point = root / "scratch"
    point.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(point)], check=True)
    try:
        site = Site(root / "site", smtp, hc, state=point / "state")
        proc = site.popen()
        try:
            wait(lambda: "scheduling " in (site.root / "scheduler.log").read_text())
            before = mail_count(smtp, "state directory full")
            subprocess.run(["dd", "if=/dev/zero", f"of={point}/filler", "bs=64k"], capture_output=True)
            t0 = time.monotonic()
            return wait(lambda: mail_count(smtp, "state directory full") > before) - t0
        finally:
            stop(proc)
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def corrupt_db(root: Path, smtp: SmtpServer, hc: FakeHTTP) -> float:
    site = Site(root, smtp, hc)
    site.state.mkdir(mode=0o700)
    (site.state / "state.sqlite3").write_bytes(b"not a database\n" * 100)
    before = mail_count(smtp, "state directory corrupt")
    t0 = time.monotonic()
    proc = site.popen()
    try:
        return wait(lambda: mail_count(smtp, "state directory corrupt") > before) - t0
    finally:
        stop(proc)


def deadman(root: Path, smtp: SmtpServer, hc: FakeHTTP, gaps: list[float]) -> float:
    """The /fail ping's latency; and, meanwhile, the largest gap between alive pings."""
    site = Site(root, smtp, hc)
    proc = site.popen()
    seen: list[float] = []
    try:
        alive = site.ping
        wait(lambda: sum(s.path == alive for s in list(hc.seen)) >= 1)
        count = 1
        while count < 6:  # five gaps between alive pings, as they come
            now = sum(s.path == alive for s in list(hc.seen))
            if now > count:
                seen.append(time.monotonic())
                count = now
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)  # the chain dies outright: only the missing ping tells
        proc.wait(10)
    finally:
        stop(proc)
    gaps.append(max(b - a for a, b in zip(seen, seen[1:], strict=False)))
    site.config.write_text(site.config.read_text().replace('tick = "1s"', 'tick = "1s'))
    fail = f"{site.ping}/fail"
    t0 = time.monotonic()
    proc = site.popen()
    try:
        return wait(lambda: any(s.path == fail for s in list(hc.seen))) - t0
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    gaps: list[float] = []
    scenarios: dict[str, Callable[[Path, SmtpServer, FakeHTTP], float]] = {
        "config": config_broken, "channel": channel_broken, "disk": disk_full, "corrupt": corrupt_db,
        "deadman /fail": lambda r, s, h: deadman(r, s, h, gaps)}
    samples: dict[str, list[float]] = {name: [] for name in scenarios}
    with SmtpServer() as smtp, FakeHTTP() as hc, tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeat):
            for name, scenario in scenarios.items():  # interleaved: A, B, C, D, E, A, B, ...
                samples[name].append(scenario(Path(tmp) / f"{name.split()[0]}-{round_}", smtp, hc))
    print(f"time from failure to message, seconds (n={args.repeat} each, interleaved)")
    print(f"{'failure':<15} {'min':>7} {'median':>7} {'max':>7}   reaches")
    reach = {"config": "email via the last good channels", "channel": "email on the other channel",
             "disk": "email, delivered from memory", "corrupt": "email (database moved aside)",
             "deadman /fail": "healthchecks.io /fail ping (pages at once)"}
    for name, values in samples.items():
        print(f"{name:<15} {min(values):7.2f} {statistics.median(values):7.2f} {max(values):7.2f}   "
              f"{reach[name]}")
    print(f"{'alive-ping gap':<15} {min(gaps):7.2f} {statistics.median(gaps):7.2f} {max(gaps):7.2f}   "
          "largest gap between alive pings (heartbeat_every = 1s); a killed chain is paged after "
          "this + the service's grace")
    figures = "; ".join(f"{name} {spread(values).fmt(unit=' s')}" for name, values in samples.items())
    record(__file__, [Row(
        "the watchdog's own failures (config broken, channel secret unsafe, state disk full, corrupt "
        "state database, config broken → deadman /fail): failure → message, real `watchdogs run`",
        "a message within a few ticks", "main: no message at all (silence or a crash loop)",
        f"{figures}; largest alive-ping gap {spread(gaps).fmt(unit=' s')}",
        f"sudo .venv/bin/python benchmarks/selfwatch_latency.py --repeat {args.repeat}")])


if __name__ == "__main__":
    main()
