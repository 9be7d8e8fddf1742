"""The adversary's probe classes (issue 27 items 2-6, issue 28 item 7's escape/size/secret
points): secrets inside URLs, control characters from config/names/outputs, unbounded
fields, hung Slurm wrappers, one problem one message, and the outbox's holder."""
from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from probe_cases import BASE, DISK, ONCE, VALIDATE, Outcome, Probe, dropin, kill_leftovers, no_leftovers

Check = Callable[[Path, Sequence[Outcome]], "str | None"]
CLOSED = "127.0.0.1:9"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SHOW = [["run", "--once"], ["run", "--once", "--json"], ["status"], ["status", "--json"],
        ["alerts", "--history", "20"], ["alerts", "--json"], ["notify-test", "n"],
        ["notify-test", "n", "--json"]]


def nowhere(*secrets: str) -> Check:
    """No secret in any output, nor in any file written (the config and its last good copy,
    the user's own text, excepted)."""
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        for secret in secrets:
            if any(secret in o.out + o.err for o in outs):
                return f"{secret} printed"
            for path in root.rglob("*"):
                if path.is_file() and path.suffix != ".toml" and "runs" not in path.parts \
                        and path.name != "tok" and "cron.d" not in path.parts \
                        and secret.encode() in path.read_bytes():
                    return f"{secret} written to {path.relative_to(root)}"
        return None
    return check


def in_words(root: Path, outs: Sequence[Outcome]) -> str | None:
    text = "\n".join(o.out + o.err for o in outs)
    if "Max retries exceeded" in text or "HTTPConnectionPool" in text:
        return "a library's exception text is shown"
    return None


def both(*checks: Check) -> Check:
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        return next((why for c in checks if (why := c(root, outs))), None)
    return check


def _url_probes() -> list[Probe]:
    urls = {
        "user:password and ?token": ("http://user:UrlPw7781@{c}/x?token=UrlTok7781",
                                     ("UrlPw7781", "UrlTok7781")),
        "user info alone": ("http://UrlUser7782@{c}/x", ("UrlUser7782",)),
        "query alone": ("http://{c}/hook?sig=UrlSig7783&x=1", ("UrlSig7783",)),
        "Slack webhook path": ("https://hooks.slack.com/services/T0/B0/SlackPath7784", ("SlackPath7784",)),
        "Discord webhook path": ("https://discord.com/api/webhooks/1/DiscordPath7785", ("DiscordPath7785",)),
        "Teams webhook path": ("https://x.webhook.office.com/webhookb2/TeamsPath7786", ("TeamsPath7786",)),
    }
    probes = []
    for label, (url, secrets) in urls.items():
        text = (BASE + DISK + 'warn = "0%"\n[[notify]]\nname = "n"\ntype = "webhook"\n'
                f'url = "{url.format(c=CLOSED)}"\ntimeout = "2s"\n')
        probes.append(Probe("url-secrets", f"{label}: run, status, alerts, notify-test", text,
                            [[a] for a in SHOW], both(nowhere(*secrets), in_words), timeout=60))
    ping = "https://hc-ping.com/HcUuid7787-aaaa"
    probes.append(Probe("url-secrets", "healthchecks ping URL (heartbeat_url)",
                        BASE + f'heartbeat_url = "{ping}"\n' + DISK,
                        [[["validate"]], [["status"]], [["run", "--once"]]],
                        nowhere("HcUuid7787"), timeout=60))
    probes.append(Probe("url-secrets", "a drop-in prints a channel's secret", BASE
                        + '[[notify]]\nname = "n"\ntype = "webhook"\nurl = "http://127.0.0.1:9/x"\n'
                        'token_file = "{root}/tok"\ntimeout = "2s"\n', [[a] for a in SHOW[:6]],
                        nowhere("DropTok7788-secret"), setup=_token_and_leaky_dropin, timeout=60))
    return probes


def _token_and_leaky_dropin(root: Path) -> None:
    (root / "tok").write_text("DropTok7788-secret\n")
    (root / "tok").chmod(0o600)
    dropin("leaky", "#!/bin/sh\necho 'CRITICAL - token is DropTok7788-secret'\nexit 2\n")(root)


def no_raw_controls(root: Path, outs: Sequence[Outcome]) -> str | None:
    for o in outs:
        found = RAW.search(o.out + o.err)
        if found:
            return f"a raw {found.group()!r} reaches the terminal"
    log = root / "alerts.log"
    if log.exists():
        text = log.read_text(errors="replace")
        if RAW.search(text):
            return "a raw control character in the logfile channel"
        if any(" WATCHDOGS " not in line or " event=" not in line for line in text.splitlines()):
            return "a forged line in the logfile channel"
    return None


LOGFILE = '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n'
FORGED = "a\n2026-01-01T00:00:00+00:00 WATCHDOGS RESOLVED train"


def _control_probes() -> list[Probe]:
    show = [[["run", "--once"]], [["status"]], [["alerts", "--history", "9"]]]
    return [
        Probe("controls", "drop-in name with a newline forges a logfile line", BASE + LOGFILE, show,
              both(no_raw_controls, _refused_by_name),
              setup=dropin(FORGED, "#!/bin/sh\necho 'CRITICAL - x'\nexit 2\n")),
        Probe("controls", "drop-in name with an escape sequence", BASE + LOGFILE, show,
              both(no_raw_controls, _refused_by_name),
              setup=dropin("x\x1b[2Jy", "#!/bin/sh\necho 'CRITICAL - x'\nexit 2\n")),
        Probe("controls", "ANSI, CR, C1 and bidi in a drop-in's first line", BASE + LOGFILE, show,
              no_raw_controls,
              setup=dropin("painter", "#!/bin/sh\nprintf 'CRITICAL - \\033[31mred\\033[0m \\302\\233 "
                                      "\\342\\200\\256 \\033]0;title\\007\\n'\nexit 2\n")),
        Probe("controls", "a newline in [alerts] cluster forges a logfile line",
              BASE + '[alerts]\ncluster = "c\\n2026-01-01T00:00:00+00:00 WATCHDOGS RESOLVED t"\n' + LOGFILE,
              show, no_raw_controls, setup=dropin("bad", "#!/bin/sh\necho 'CRITICAL - x'\nexit 2\n")),
        Probe("controls", "escape sequence in a silence reason", BASE,
              [[["silence", "x", "--for", "1h", "--reason", "a\x1b[2Jb\nforged"]], [["silences"]],
               [["status"]]],
              no_raw_controls),
        Probe("controls", "CR/LF in an email address", BASE + '[[notify]]\nname = "n"\ntype = "email"\n'
              'sender = "a@x.org"\nto = ["a@x.org\\r\\nBcc: b@y.org"]\n', VALIDATE, _refused_naming("'\\r'")),
        Probe("controls", "CR/LF in a webhook header", BASE + '[[notify]]\nname = "n"\ntype = "webhook"\n'
              'url = "http://127.0.0.1:9/"\nheaders = { X-Team = "ml\\r\\nX-Evil: 1" }\n', VALIDATE,
              _refused_naming("'\\n'")),
        Probe("controls", "CR/LF in the SMTP login name", BASE + '[[notify]]\nname = "n"\ntype = "email"\n'
              'sender = "a@x.org"\nto = ["b@x.org"]\nusername = "u\\r\\nRCPT TO:<c@y.org>"\n'
              'password_env = "HOME"\n', VALIDATE, _refused_naming("'\\r'")),
        Probe("controls", "a display name or list in to", BASE + '[[notify]]\nname = "n"\ntype = "email"\n'
              'sender = "a@x.org"\nto = ["Bob <b@x.org>, c@y.org"]\n', VALIDATE, _refused_naming("key 'to'")),
        Probe("sizes", "a 50 MB drop-in line in the logfile channel", BASE + LOGFILE, show, _bounded,
              setup=dropin("flood", "#!/bin/sh\nprintf 'CRITICAL - '\n"
                                    "head -c 50000000 /dev/zero | tr '\\0' x\necho\nexit 2\n"), timeout=120),
    ]


def _refused_by_name(root: Path, outs: Sequence[Outcome]) -> str | None:
    text = "\n".join(o.out for o in outs)
    return None if "name not run" in text else "a drop-in name cron would not run is not refused"


def _refused_naming(needle: str) -> Check:
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        o = outs[0]
        if o.code != 2:
            return f"accepted (exit {o.code})"
        return None if needle in o.out + o.err else f"the refusal does not say {needle}"
    return check


def _bounded(root: Path, outs: Sequence[Outcome]) -> str | None:
    log = root / "alerts.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    longest = max((len(x) for x in text.splitlines()), default=0)
    shown = max((len(x) for o in outs for x in (o.out + o.err).splitlines()), default=0)
    if longest > 10_000 or shown > 10_000:
        return f"a line of {max(longest, shown):,} characters"
    return None if log.exists() else "no alert line written"


HANG = "#!/bin/sh\necho $$ >> {root}/pids\nsleep 8861 &\nsh -c 'sleep 8862' &\nsleep 8863\n"


def _hung_slurm(root: Path) -> None:
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name in ("squeue", "sinfo", "sacct", "scontrol", "sbatch"):
        (bin_dir / name).write_text(HANG.replace("{root}", str(root)))
        (bin_dir / name).chmod(0o755)


def _hang_probes() -> list[Probe]:
    config = (BASE + '[[check]]\nname = "j"\ntype = "job"\njob_name = "train"\n'
              '[[check]]\nname = "nodes"\ntype = "nodes"\n')
    path = (("PATH", "{root}/bin:" + os.environ.get("PATH", "/usr/bin:/bin")),)
    return [
        Probe("hangs", "every Slurm command a hung wrapper with children", config, ONCE,
              _no_sleepers, setup=_hung_slurm, cleanup=kill_leftovers("sleep 886"), env=path, timeout=45),
        Probe("hangs", "hung sbatch wrapper for a *.slurm drop-in", BASE, ONCE, _no_sleepers,
              setup=_hung_slurm_and_slurm_dropin,
              cleanup=kill_leftovers("sleep 886"), env=path, timeout=50),
    ]


def _hung_slurm_and_slurm_dropin(root: Path) -> None:
    _hung_slurm(root)
    dropin("j.slurm", "#!/bin/bash\ntrue\n", 0o600)(root)


def _no_sleepers(root: Path, outs: Sequence[Outcome]) -> str | None:
    return no_leftovers("sleep 886")(root, outs)


def _validate_probes() -> list[Probe]:
    text = (BASE + '[alerts]\nnotify = { warning = ["log"] }\n' + DISK
            + 'notify = { warning = ["log"], critical = ["log"], unknown = ["log"], resolved = ["log"] }\n'
            + '[[notify]]\nname = "log"\ntype = "email"\nsender = "a@x.org"\nto = ["nobody"]\n')
    return [Probe("validate", "a channel that failed validation, referenced 5 times", text, VALIDATE,
                  _one_problem)]


def _one_problem(root: Path, outs: Sequence[Outcome]) -> str | None:
    lines = [x for x in (outs[0].out + outs[0].err).splitlines() if x.startswith("  ")]
    return None if len(lines) == 1 else f"{len(lines)} problems for one bad address"


def _leased(root: Path) -> None:
    """An outbox item held by a process that is gone (killed mid-delivery)."""
    import subprocess
    import sys

    env = {**os.environ, "WATCHDOGS_CONFIG": str(root / "watchdogs.toml")}
    subprocess.run([sys.executable, "-m", "watchdogs", "run", "--once"], env=env, cwd=root,
                   capture_output=True, timeout=60, check=False)
    db = sqlite3.connect(root / "state" / "state.sqlite3")
    with db:
        db.execute("UPDATE outbox SET lease_until = ?, lease_owner = ? WHERE delivered IS NULL",
                   (time.time() + 40, f"{os.uname().nodename}:999999:dead@{time.time() - 5:.3f}"))
    db.close()


def _alerts_probes() -> list[Probe]:
    text = BASE + DISK + 'warn = "0%"\n[[notify]]\nname = "n"\ntype = "webhook"\nurl = "http://127.0.0.1:9/"\n'
    return [Probe("alerts", "a message held by a killed sender", text, [[["alerts"]]],
                  lambda r, o: None if "being sent by pid 999999" in o[0].out else "holder not named",
                  setup=_leased)]


PROBES: list[Probe] = (_url_probes() + _control_probes() + _hang_probes() + _validate_probes()
                       + _alerts_probes())
