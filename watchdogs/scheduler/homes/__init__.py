"""Other homes for the scheduler than the self-perpetuating Slurm job: Slurm's own cron
(`scrontab`), a login node's user crontab, a systemd user timer. Each runs `watchdogs run
--once --due --home KIND` every minute, with the same config, state and locks as the chain
(watchdogs.scheduler.home takes the scheduler lock, so two homes never both tick).

Each kind answers `detect()` (does it work for this user here, and why not), installs its
entry and removes it again. The crontab kinds keep the user's own lines: ours sit in one
marked block, replaced whole or removed whole (`merge`, `strip`, pure).
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KINDS = ("job", "scrontab", "cron", "timer")
BEGIN = "# >>> slurm-watchdogs (watchdogs start --home {kind}) >>>"
END = "# <<< slurm-watchdogs <<<"
EVERY = "* * * * *"
"""Every minute: the finest a cron offers. Items with a shorter period run once a minute."""
TIMEOUT_S = 20.0
UNIT = "watchdogs"


@dataclass(frozen=True)
class HomeSupport:
    kind: str
    works: bool
    why: str


def _run(argv: Sequence[str], input_text: str | None = None) -> subprocess.CompletedProcess[str] | None:
    """None when the command is not here."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=TIMEOUT_S, input=input_text,
                              check=False)
    except FileNotFoundError:
        return None
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "",
                                           f"{argv[0]} did not answer within {TIMEOUT_S:g}s")


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join((done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").split())[:200]


# -- detection -------------------------------------------------------------------------
def judge_listing(kind: str, done: subprocess.CompletedProcess[str] | None) -> HomeSupport:
    """Pure: what `scrontab -l` / `crontab -l` said, as an answer."""
    tool = "scrontab" if kind == "scrontab" else "crontab"
    if done is None:
        return HomeSupport(kind, False, f"no {tool} command here")
    text = f"{done.stdout}\n{done.stderr}".lower()
    if "disabled" in text:
        return HomeSupport(kind, False, f"{tool} is disabled on this cluster ({_said(done)})")
    if "not allowed" in text or "permission denied" in text:
        return HomeSupport(kind, False, f"{tool} is not allowed for you here ({_said(done)})")
    if done.returncode == 0 or "no crontab for" in text:
        where = "Slurm runs it on a compute node" if kind == "scrontab" else \
            f"runs on this host only ({os.uname().nodename}): the state folder must be shared with it"
        return HomeSupport(kind, True, f"{tool} works for you: {where}")
    return HomeSupport(kind, False, f"{tool} -l failed: {_said(done)}")


def detect(kind: str) -> HomeSupport:
    if kind == "job":
        return HomeSupport(kind, True, "the self-perpetuating Slurm job (the default)")
    if kind in ("scrontab", "cron"):
        return judge_listing(kind, _run(["scrontab" if kind == "scrontab" else "crontab", "-l"]))
    if kind == "timer":
        bus = _run(["systemctl", "--user", "show-environment"])
        if bus is None:
            return HomeSupport(kind, False, "no systemctl here")
        if bus.returncode != 0:
            return HomeSupport(kind, False, f"no systemd user manager for you ({_said(bus)})")
        linger = _run(["loginctl", "show-user", str(os.getuid()), "--property=Linger"])
        if linger is None or "Linger=yes" not in linger.stdout:
            return HomeSupport(kind, False, "systemd user timers stop at logout here (no linger: "
                               "`loginctl enable-linger` is the site's to allow)")
        return HomeSupport(kind, True, f"systemd user timer works (linger on; this host only: "
                           f"{os.uname().nodename})")
    raise ValueError(f"unknown home {kind!r} (one of {', '.join(KINDS)})")


# -- the lines ---------------------------------------------------------------------------
def command(config: Path, kind: str, python: str | None = None) -> str:
    """The line a cron runs: absolute paths only (a cron's environment is minimal), each
    quoted for /bin/sh."""
    py = python or sys.executable
    return (f"WATCHDOGS_CONFIG={shlex.quote(str(config))} {shlex.quote(py)} -m watchdogs --config "
            f"{shlex.quote(str(config))} run --once --due --home {kind}")


def scron_options(job_name: str, output: Path, env: Mapping[str, str]) -> str:
    """The #SCRON line: small and short, where SBATCH_* say (as for the chain)."""
    opts = [f"--job-name={job_name}-scron", "--time=00:05:00", "--mem=256M", "--cpus-per-task=1",
            f"--output={output}/scron-%j.out", "--open-mode=append"]
    for var, opt in (("SBATCH_PARTITION", "partition"), ("SBATCH_ACCOUNT", "account"), ("SBATCH_QOS", "qos")):
        if env.get(var):
            opts.append(f"--{opt}={env[var]}")
    return "#SCRON " + " ".join(shlex.quote(o) for o in opts)


def block(kind: str, line: str, scron: str | None = None) -> str:
    body = [BEGIN.format(kind=kind)] + ([scron] if scron else []) + [f"{EVERY} {line}", END]
    return "\n".join(body) + "\n"


def strip(text: str) -> str:
    """The user's crontab without our block (every copy of it)."""
    kept, inside = [], False
    for line in text.splitlines():
        if line.startswith("# >>> slurm-watchdogs"):
            inside = True
            continue
        if inside and line.startswith(END):
            inside = False
            continue
        if not inside:
            kept.append(line)
    return "\n".join(kept) + ("\n" if kept else "")


def merge(text: str, ours: str) -> str:
    """The user's lines kept as they are, ours in one block at the end."""
    rest = strip(text)
    return rest + ("" if not rest or rest.endswith("\n") else "\n") + ours


def installed(text: str) -> bool:
    return "# >>> slurm-watchdogs" in text


# -- installing ------------------------------------------------------------------------
def _tool(kind: str) -> str:
    return "scrontab" if kind == "scrontab" else "crontab"


def current(kind: str) -> str:
    """The user's table now ('' when none)."""
    done = _run([_tool(kind), "-l"])
    if done is None or done.returncode != 0:
        return ""
    return done.stdout


def _replace(kind: str, text: str) -> None:
    """Hand the whole table to (s)crontab from a private file (never through a shell)."""
    with tempfile.NamedTemporaryFile("w", prefix="watchdogs-cron-", suffix=".txt", delete=False) as tmp:
        os.fchmod(tmp.fileno(), 0o600)
        tmp.write(text)
    try:
        done = _run([_tool(kind), tmp.name])
    finally:
        os.unlink(tmp.name)
    if done is None or done.returncode != 0:
        raise OSError(f"{_tool(kind)} refused the table: {_said(done) if done else 'command not here'}")


def install_cron(kind: str, ours: str) -> None:
    _replace(kind, merge(current(kind), ours))


def remove_cron(kind: str) -> bool:
    """True when a block was there and is gone."""
    text = current(kind)
    if not installed(text):
        return False
    _replace(kind, strip(text))
    return True


def timer_units(line: str) -> dict[str, str]:
    """The systemd user units: a oneshot service and a timer every minute (Persistent: a
    run missed while the host slept runs at boot)."""
    return {f"{UNIT}.service": f"[Unit]\nDescription=slurm-watchdogs, one run of the due checks\n\n"
                               f"[Service]\nType=oneshot\nExecStart=/bin/sh -c {shlex.quote(line)}\n",
            f"{UNIT}.timer": "[Unit]\nDescription=slurm-watchdogs every minute\n\n"
                             "[Timer]\nOnCalendar=*-*-* *:*:00\nPersistent=true\n\n"
                             "[Install]\nWantedBy=timers.target\n"}


def _unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def install_timer(line: str) -> None:
    folder = _unit_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, text in timer_units(line).items():
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
    for argv in (["systemctl", "--user", "daemon-reload"],
                 ["systemctl", "--user", "enable", "--now", f"{UNIT}.timer"]):
        done = _run(argv)
        if done is None or done.returncode != 0:
            raise OSError(f"{' '.join(argv)} failed: {_said(done) if done else 'no systemctl'}")


def remove_timer() -> bool:
    folder = _unit_dir()
    if not (folder / f"{UNIT}.timer").exists():
        return False
    _run(["systemctl", "--user", "disable", "--now", f"{UNIT}.timer"])
    for name in (f"{UNIT}.timer", f"{UNIT}.service"):
        (folder / name).unlink(missing_ok=True)
    return True


def remove(kind: str) -> bool:
    """Remove our entry of `kind` (not the chain: `watchdogs stop` does that)."""
    if kind in ("scrontab", "cron"):
        return remove_cron(kind)
    if kind == "timer":
        return remove_timer()
    return False
