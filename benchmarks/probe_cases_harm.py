"""Probes for issue 28's classes "trust only the user's own files", "nothing freezes the
scheduler" and "what it says is true" (benchmarks/probes.py concatenates them).

trainguard's "never start over silently" is not here: the probe table runs the `watchdogs`
command line only; tests/trainguard/test_no_silent_start_over.py runs it on real files.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from probe_cases import BASE, ONCE, VALIDATE, Check, Outcome, Probe, dropin, status_says

PAYLOAD = "{{ cycler.__init__.__globals__.os.system('id > %s') }}\n"
FAILING = dropin("disk", "#!/bin/sh\necho disk on fire\nexit 2\n")
LOGFILE = '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n'
RUNAWAY = "iter ((?:a|aa)+)$"
SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(500); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
"""


def _all(*setups: Callable[[Path], object]) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        for one in setups:
            one(root)
    return setup


def _both(*checks: Check) -> Check:
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        return next((why for c in checks if (why := c(root, outs))), None)
    return check


def _mode(name: str, mode: int, folder: bool = False, text: str = "") -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        path = root / name
        if folder:
            path.mkdir(exist_ok=True)
        elif not path.exists():
            path.write_text(text)
        path.chmod(mode)
    return setup


def _template(mode: int) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        (root / "tpl").mkdir(exist_ok=True)
        (root / "tpl" / "logfile.txt.j2").write_text(PAYLOAD % (root / "PWNED"))
        (root / "tpl").chmod(mode)
    return setup


def _refused_saying(*needles: str) -> Check:
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        text = "\n".join(o.out + o.err for o in outs)
        if outs[0].code != 2:
            return f"accepted (exit {outs[0].code})"
        missing = [n for n in needles if n not in text]
        return f"does not say {missing}" if missing else None
    return check


def _not_pwned(root: Path, outs: Sequence[Outcome]) -> str | None:
    if (root / "PWNED").exists():
        return "the template ran code as the watchdog's user"
    log = root / "alerts.log"
    return None if log.exists() and "disk on fire" in log.read_text() else "the alert was lost"


def _nothing_written(root: Path, outs: Sequence[Outcome]) -> str | None:
    return "wrote into the untrusted state folder" if (root / "state" / "runs").exists() else None


def _trust_probes() -> list[Probe]:
    tpl = BASE + '[alerts]\ntemplates = "tpl"\nnotify = "log"\n' + LOGFILE
    job = BASE + '[[check]]\nname = "t"\ntype = "job"\njob_name = "t"\nresubmit = "train.slurm"\n'
    return [
        Probe("trust", "templates folder 0777 with a code-running template", tpl, VALIDATE,
              _refused_saying("writable by others (mode 0777)", "chmod go-w"), setup=_template(0o777)),
        Probe("trust", "own template reaching for os (sandbox)", tpl, ONCE, _not_pwned,
              setup=_all(_template(0o700), FAILING)),
        Probe("trust", "resubmit script 0777", job, VALIDATE,
              _refused_saying("train.slurm: writable by others (mode 0777)"),
              setup=_mode("train.slurm", 0o777, text="#!/bin/sh\nsleep 1\n")),
        Probe("trust", "state folder 0777", BASE + LOGFILE, ONCE,
              _both(_refused_saying("state: writable by others (mode 0777)"), _nothing_written),
              setup=_mode("state", 0o777, folder=True)),
        Probe("trust", "config file 0666", BASE, VALIDATE,
              _refused_saying("writable by others (mode 0666)"), setup=_mode("watchdogs.toml", 0o666)),
    ]


def _runaway_log(root: Path) -> None:
    (root / "train.log").write_text("iter " + "a" * 100 + "!\n")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "alerts.log")


def _freeze_probes() -> list[Probe]:
    config = (BASE + 'check_timeout = "10s"\ntick = "1s"\n[[check]]\nname = "train"\ntype = "log_stale"\n'
              f'path = "train.log"\nmax_age = "1h"\nevery = "2s"\nprogress = \'{RUNAWAY}\'\n')
    return [
        Probe("freeze", "runaway progress regex, run --once", config, [[["run", "--once"]]],
              status_says("UNKNOWN", "took longer than 1 s", "simplify it"), setup=_runaway_log,
              timeout=40),
        Probe("freeze", "runaway progress regex, SIGTERM to foreground run", config, [[["validate"]]],
              status_says("scheduler instance ended"), setup=_runaway_log, background=("run",),
              wait_for="state/locks", timeout=40),
        Probe("freeze", "logfile channel path is a FIFO nobody reads", BASE + LOGFILE,
              [[["run", "--once"]]], status_says("disk on fire", "a FIFO"), setup=_all(FAILING, _fifo),
              timeout=40),
    ]


def _start_500(root: Path) -> None:
    port_file = root / "port"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port_file)], start_new_session=True)
    (root / "server.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + 10
    while not (port_file.exists() and port_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    config = root / "watchdogs.toml"
    config.write_text(config.read_text().replace("{port}", port_file.read_text()))


def _stop_500(root: Path) -> None:
    pid = root / "server.pid"
    if pid.exists():
        os.killpg(int(pid.read_text()), signal.SIGKILL)


def _not_said_sent(root: Path, outs: Sequence[Outcome]) -> str | None:
    shown = outs[-1].out
    if "last sent" in shown or "sent 20" in shown:
        return f"says sent: {shown.strip()[:120]}"
    return None


def _truth_probes() -> list[Probe]:
    wh = BASE + '[[notify]]\nname = "wh"\ntype = "webhook"\nurl = "http://127.0.0.1:{port}/x"\n'
    token = (BASE + '[[notify]]\nname = "wh"\ntype = "webhook"\nurl = "http://127.0.0.1:9/x"\n'
             'token_file = "token"\n' + LOGFILE)
    once_then_alerts = [[["run", "--once"]], [["alerts"]]]
    return [
        Probe("truth", "alerts after the only channel answered HTTP 500", wh, once_then_alerts,
              _both(_not_said_sent, status_says("NOT delivered via wh")),
              setup=_all(FAILING, _start_500), cleanup=_stop_500),
        Probe("truth", "alerts with no channel at all", BASE, once_then_alerts,
              _both(_not_said_sent, status_says("sent nowhere")), setup=FAILING),
        Probe("truth", "validate with no channel warns", BASE, VALIDATE,
              status_says("every alert goes nowhere")),
        Probe("truth", "one 0644 secret file in run --once", token, [[["run", "--once"]]],
              status_says("disk on fire", "DISABLED channel wh"),
              setup=_all(FAILING, _mode("token", 0o644, text="s3cret\n"))),
        Probe("truth", "drop-in killed by SIGKILL", BASE, [[["run", "--once"]]],
              status_says("killed by signal 9"), setup=dropin("selfkill", "#!/bin/sh\necho x\nkill -9 $$\n")),
        Probe("truth", "alerts --history 99999999999999999999", BASE,
              [[["alerts", "--history", "99999999999999999999"]]],
              _refused_saying("expected a number from 0 to")),
    ]


PROBES: list[Probe] = _trust_probes() + _freeze_probes() + _truth_probes()
