"""The probes of benchmarks/probes.py: a config, optional files, command lines, and a rule.

`steps` is a list of steps; a step is a list of command lines started at the same moment.
`check(root, outcomes)` returns why the probe went wrong, or None when it was handled.
"""
from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Outcome:
    code: int | None
    out: str
    err: str
    hung: bool


Check = Callable[[Path, Sequence[Outcome]], "str | None"]


@dataclass(frozen=True)
class Probe:
    category: str
    name: str
    config: str
    steps: list[list[list[str]]]
    check: Check
    setup: Callable[[Path], object] | None = None
    cleanup: Callable[[Path], None] | None = None
    timeout: float = 60.0
    needs_slurm: bool = False
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment; "{root}" in a value is the site's folder."""
    background: tuple[str, ...] = ()
    """A command started first and stopped (SIGTERM) once the steps are done."""
    wait_for: str = ""
    """With `background`: start the steps once this file (under the site) exists."""


BASE = '[scheduler]\nstate_dir = "state"\njob_name = "wd-probe"\n'
DISK = '[[check]]\nname = "d"\ntype = "disk"\npath = "."\n'
VALIDATE = [[["validate"]]]
ONCE = [[["run", "--once", "--json"]]]


def refused(root: Path, outs: Sequence[Outcome]) -> str | None:
    """A bad config: exit 2, and every problem line names the file."""
    o = outs[0]
    if o.code != 2:
        return f"accepted (exit {o.code}): {o.out.strip()[:80]}"
    lines = [x for x in (o.out + o.err).splitlines() if x.startswith("  ")]
    config = str(root / "watchdogs.toml")
    if not lines or not all(config in x for x in lines):
        return f"problems do not name the file: {(o.out + o.err).strip()[:100]}"
    return None


def runs_cleanly(root: Path, outs: Sequence[Outcome]) -> str | None:
    """Accepted or refused, but if accepted it must also run (no 'internal error')."""
    if any("internal error" in o.out for o in outs):
        return "a run ended in an internal error"
    return None


def no_secret(secret: str) -> Check:
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        if any(secret in o.out + o.err for o in outs):
            return "the secret is printed"
        for path in root.rglob("*"):
            written = path.is_file() and path.name != "watchdogs.toml"
            if written and secret in path.read_text(errors="replace"):
                return f"the secret is written to {path.relative_to(root)}"
        return None
    return check


def status_says(*needles: str) -> Check:
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        text = "\n".join(o.out + o.err for o in outs)
        missing = [n for n in needles if n not in text]
        return f"status does not say: {missing}" if missing else None
    return check


def dropin(name: str, body: str, mode: int = 0o700, folder: str = "cron.hourly") -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        path = root / "cron.d" / folder / name
        path.write_text(body)
        path.chmod(mode)
    return setup


def _alive(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if marker in cmd and state != "Z":
                found.append(int(entry))
    return found


def no_leftovers(marker: str) -> Check:
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        left = _alive(marker)
        return f"{len(left)} processes left running" if left else None
    return check


def kill_leftovers(marker: str) -> Callable[[Path], None]:
    def cleanup(root: Path) -> None:
        for pid in _alive(marker):
            os.kill(pid, signal.SIGKILL)
    return cleanup


def log_at_most(limit: int) -> Check:
    def check(root: Path, outs: Sequence[Outcome]) -> str | None:
        biggest = max((p.stat().st_size for p in (root / "state").rglob("*.log*")), default=0)
        return f"a run log of {biggest} bytes" if biggest > limit else None
    return check


def ran_alone(root: Path, outs: Sequence[Outcome]) -> str | None:
    """The slow drop-in's runs never overlapped (one after the other is fine)."""
    trace = (root / "trace").read_text().split() if (root / "trace").exists() else []
    depth = 0
    for mark in trace:
        depth += 1 if mark == "start" else -1
        if depth > 1:
            return "two runs at once"
    return None if trace else "never ran"


def _config_is_a_folder(root: Path) -> None:
    (root / "watchdogs.toml").unlink()
    (root / "watchdogs.toml").mkdir()


def _config_probes() -> list[Probe]:
    bad = {
        "tick 0s": BASE + 'tick = "0s"\n',
        "period 0s": BASE + '[cron]\nhourly = "0s"\n',
        "check every 0s": BASE + DISK + 'every = "0s"\n',
        "duration too large": BASE + '[cron]\nhourly = "99999999999999999999d"\n',
        "timeout overflows time_t": BASE + 'dropin_timeout = "9999999999999d"\n',
        "check timeout overflows": BASE + DISK + 'timeout = "999999999999d"\n',
        "state_dir is a file": '[scheduler]\nstate_dir = "watchdogs.toml"\n',
        "state_dir climbs above /": '[scheduler]\nstate_dir = "' + "../" * 40 + 'st"\n',
        "job_name with /": '[scheduler]\nstate_dir = "state"\njob_name = "a/b"\n',
        "job_name with comma": '[scheduler]\nstate_dir = "state"\njob_name = "a,b"\n',
        "templates folder missing": BASE + '[alerts]\ntemplates = "nope"\n',
        "warn above crit": BASE + DISK + 'warn = "95%"\ncrit = "90%"\n',
        "crit below default warn": BASE + DISK + 'crit = "50%"\n',
        "NUL in a path": BASE + DISK.replace('path = "."', 'path = "a\\u0000b"'),
        "size without unit": BASE + DISK + 'warn = "80"\n',
        "size as a bare integer": BASE + DISK + 'crit = 90\n',
        "size of 400 digits": BASE + DISK + 'bytes_limit = "' + "9" * 400 + 'G"\n',
        "nan threshold": BASE + DISK + 'warn_days = nan\n',
        "check name with /": BASE + '[[check]]\nname = "a/b"\ntype = "disk"\npath = "."\n',
        "cron_dir is a file": '[scheduler]\nstate_dir = "state"\ncron_dir = "watchdogs.toml"\n',
        "~user that does not exist": '[scheduler]\nstate_dir = "~no-such-user-x/st"\n',
        "TOML syntax error": BASE + 'tick = 10s\n',
        "unknown check type": BASE + '[[check]]\nname = "x"\ntype = "gpu"\n',
        "duplicate names": BASE + DISK + DISK,
        "a table where an array is expected": BASE + '[check]\nname = "x"\n',
        "regex that does not compile": BASE + '[[check]]\nname = "l"\ntype = "log_stale"\npath = "x.log"\n'
                                       'progress = "(("\n',
        "deeply nested array": BASE + "x = " + "[" * 3000 + "]" * 3000 + "\n",
    }
    probes = [Probe("config", name, text, VALIDATE, refused) for name, text in bad.items()]
    probes.append(Probe("config", "non-UTF-8 bytes", BASE, VALIDATE, refused,
                        setup=lambda root: (root / "watchdogs.toml").write_bytes(
                            BASE.encode() + b'[alerts]\ncluster = "caf\xe9"\n')))
    probes.append(Probe("config", "syntax error wording", BASE + "tick = 10s\n", VALIDATE,
                        lambda root, outs: "says 'valid TOML (...)'" if "valid TOML (" in outs[0].out
                        else None if "line 4, column" in outs[0].out else "no line and column"))
    probes.append(Probe("config", "config is a folder", "", VALIDATE,
                        lambda root, outs: None if outs[0].code == 2 else f"exit {outs[0].code}",
                        setup=_config_is_a_folder))
    probes.append(Probe("config", "edge values that validate also run",
                        BASE + 'tick = "1s"\ncheck_timeout = "3650d"\n[cron]\nhourly = "3650d"\n' + DISK
                        + 'every = "1s"\ntimeout = "3650d"\nwarn = "0%"\ncrit = "100%"\n'
                        'bytes_limit = "7EiB"\nwarn_days = 1e300\n', ONCE, runs_cleanly))
    return probes


SECRETS = [("email", "password", "hunter2-hunter2"), ("slack", "token", "xoxb-1111-SECRETSECRET"),
           ("slack", "webhook_url", "https://hooks.slack.com/services/T0/B0/SECRETSECRET"),
           ("sms", "auth_token", "twilio-auth-SECRET-0001"), ("webhook", "token", "tok-SECRET-0002"),
           ("email", "smtp_password", "hunter3-hunter3")]


def _secret_probes() -> list[Probe]:
    probes = []
    for channel, key, secret in SECRETS:
        text = BASE + f'[[notify]]\nname = "n"\ntype = "{channel}"\n{key} = "{secret}"\n'
        for argv in (["validate"], ["validate", "--json"], ["run", "--once"], ["run"]):
            probes.append(Probe("secrets", f"{key} in [[notify]] {channel}: {' '.join(argv)}", text,
                                [[argv]], no_secret(secret), timeout=30))
    hook = "hooks.slack.com/services/T0/B0/SECRETSECRET"
    probes.append(Probe("secrets", "token-shaped url under a plain key", BASE + '[[notify]]\nname = "n"\n'
                        f'type = "webhook"\nurl = "{hook}"\n', VALIDATE, no_secret("SECRETSECRET")))
    probes.append(Probe("secrets", "Bearer token in an unknown key", BASE + '[[notify]]\nname = "n"\n'
                        'type = "webhook"\nurl = "http://127.0.0.1:9/"\n'
                        'extra = { Authorization = "Bearer abc.SECRETSECRET" }\n', VALIDATE,
                        no_secret("SECRETSECRET")))
    return probes


def _dropin_probes() -> list[Probe]:
    marker = "7431"
    return [
        Probe("dropins", "stdout flood (yes)", BASE, ONCE, log_at_most((1 << 20) + 8192),
              setup=dropin("noisy", "#!/bin/sh\n# watchdogs: timeout=3s\nyes flood\n")),
        Probe("dropins", "stderr flood", BASE, ONCE, log_at_most((1 << 20) + 8192),
              setup=dropin("noisy", "#!/bin/sh\n# watchdogs: timeout=3s\nyes flood >&2\n")),
        Probe("dropins", "one endless line", BASE, ONCE, log_at_most((1 << 20) + 8192),
              setup=dropin("noisy", "#!/bin/sh\n# watchdogs: timeout=3s\ntr -d '\\n' < /dev/zero\n")),
        Probe("dropins", "background child left running", BASE, ONCE, no_leftovers(f"sleep {marker}1"),
              setup=dropin("leaky", f"#!/bin/sh\nsleep {marker}1 &\necho ok\n"),
              cleanup=kill_leftovers(f"sleep {marker}1")),
        Probe("dropins", "setsid grandchild", BASE, ONCE, no_leftovers(f"sleep {marker}2"),
              setup=dropin("leaky", f"#!/bin/sh\nsetsid sh -c 'sleep {marker}2 &' \necho ok\n"),
              cleanup=kill_leftovers(f"sleep {marker}2")),
        Probe("dropins", "daemon with closed output", BASE, ONCE, no_leftovers(f"sleep {marker}3"),
              setup=dropin("leaky", f"#!/bin/sh\nsetsid sleep {marker}3 >/dev/null 2>&1 </dev/null &\n"
                           "echo ok\n"), cleanup=kill_leftovers(f"sleep {marker}3")),
        Probe("dropins", "hangs and ignores TERM", BASE, ONCE, no_leftovers(f"sleep {marker}4"),
              setup=dropin("stuck", f"#!/bin/sh\n# watchdogs: timeout=2s\ntrap '' TERM\nsleep {marker}4\n"),
              cleanup=kill_leftovers(f"sleep {marker}4")),
        Probe("dropins", "binary output", BASE, ONCE, runs_cleanly,
              setup=dropin("bin", "#!/bin/sh\nhead -c 4096 /dev/urandom\n")),
        Probe("dropins", "no shebang", BASE, ONCE, runs_cleanly, setup=dropin("plain", "echo hi\n")),
        Probe("dropins", "not executable shown in status", BASE, [[["status"]]],
              status_says("forgot: not executable"), setup=dropin("forgot", "#!/bin/sh\necho\n", 0o600)),
        Probe("dropins", "dangling symlink shown in status", BASE, [[["status"]]],
              status_says("gone: dangling symlink"),
              setup=lambda r: (r / "cron.d/cron.hourly/gone").symlink_to(r / "nowhere")),
        Probe("dropins", "symlink loop shown in status", BASE, [[["status"]]], status_says("a: symlink loop"),
              setup=_loop),
        Probe("dropins", "crontab name=.. escapes the log folder", BASE, [[["run", "--once"]], [["status"]]],
              _no_escape,
              setup=_dotdot_crontab),
        Probe("dropins", "group-writable drop-in refused", BASE, [[["status"]]],
              status_says("shared: writable by group"), setup=dropin("shared", "#!/bin/sh\necho\n", 0o770)),
    ]


def _concurrency_probes() -> list[Probe]:
    def slow(root: Path) -> None:
        dropin("slow", f"#!/bin/sh\necho start >> {root}/trace\nsleep 6\necho end >> {root}/trace\n"
               "echo 'OK - slow'\n")(root)
    return [
        Probe("concurrency", "two run --once at the same moment", BASE, [[["run", "--once"]] * 2],
              ran_alone, setup=slow),
        Probe("concurrency", "three run --once at the same moment", BASE, [[["run", "--once"]] * 3],
              ran_alone, setup=slow),
        Probe("concurrency", "run --once beside a running scheduler", BASE + '[cron]\nhourly = "1h"\n',
              [[["run", "--once"]]], ran_alone, setup=slow, background=("run",), wait_for="trace"),
        Probe("concurrency", "a *.slurm drop-in from three processes at once", BASE,
              [[["run", "--once"]] * 3], _one_job, setup=dropin(
                  "job.slurm", "#!/bin/bash\n#SBATCH --job-name=wd-probe-dup\n#SBATCH --hold\n"
                  "#SBATCH --time=2\nsleep 100\n", 0o600), cleanup=_cancel_dups, needs_slurm=True),
    ]


def _loop(root: Path) -> None:
    (root / "cron.d/cron.hourly/a").symlink_to(root / "cron.d/cron.hourly/b")
    (root / "cron.d/cron.hourly/b").symlink_to(root / "cron.d/cron.hourly/a")


def _dotdot_crontab(root: Path) -> None:
    (root / "cron.d/crontab").write_text("@hourly name=.. hi.sh\n")
    (root / "cron.d/crontab").chmod(0o600)
    dropin("hi.sh", "#!/bin/sh\necho hi\n", folder=".")(root)


def _corrupt_db(root: Path) -> None:
    (root / "state").mkdir(mode=0o700)
    (root / "state" / "state.db").write_bytes(b"not sqlite" * 100)


def _no_escape(root: Path, outs: Sequence[Outcome]) -> str | None:
    if list((root / "state" / "runs").glob("*.log")):
        return "a run log written outside its item's folder"
    return status_says("name='..'")(root, outs)


def _one_job(root: Path, outs: Sequence[Outcome]) -> str | None:
    jobs = os.popen("squeue -h -o %i --name=wd-probe-dup").read().split()
    return None if len(jobs) == 1 else f"{len(jobs)} jobs submitted"


def _cancel_dups(root: Path) -> None:
    os.system("scancel --name=wd-probe-dup")


def _outage_probes() -> list[Probe]:
    return [
        Probe("outages", "corrupt state database", BASE + DISK, ONCE, runs_cleanly,
              setup=_corrupt_db),
        Probe("outages", "sbatch missing for a *.slurm drop-in", BASE, ONCE,
              lambda r, o: None if "sbatch: command not found" in o[0].out else o[0].out[:100],
              setup=dropin("j.slurm", "#!/bin/bash\ntrue\n", 0o600), env=(("PATH", "{root}/no-bin"),)),
        Probe("outages", "Slurm controller unreachable", BASE + '[[check]]\nname = "j"\ntype = "job"\n'
              'job_name = "x"\n', ONCE, lambda r, o: None if o[0].code == 3 else f"exit {o[0].code}",
              setup=lambda r: (r / "slurm.conf").write_text(
                  "ClusterName=gone\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n"),
              env=(("SLURM_CONF", "{root}/slurm.conf"),), timeout=90),
    ]


PROBES: list[Probe] = (_config_probes() + _secret_probes() + _dropin_probes() + _concurrency_probes()
                       + _outage_probes())
