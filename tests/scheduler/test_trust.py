"""Trust only the user's own files (docs/trust.md): templates, resubmit scripts, the state
folder and the config are refused when someone else could have written them, with the
path, the owner, the mode and the fix. The root tests give files to a second Unix user
(`nobody`) in a fixture and run the real `watchdogs` command as the ordinary user `wdtest`."""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import privileged
from tests.scheduler.conftest import Site, script

PAYLOAD = "{{ cycler.__init__.__globals__.os.system('id > %s') }}\n"
NOBODY = pwd.getpwnam("nobody").pw_uid


def _logfile_site(site: Site, templates: str = "tpl") -> Path:
    site.write_config(f'[alerts]\nnotify = "log"\ntemplates = "{templates}"\n'
                      '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n')
    site.dropin("failing", script("echo disk on fire; exit 2"))
    return site.root / "alerts.log"


def test_a_template_that_reaches_for_os_renders_in_the_sandbox_and_runs_nothing(site: Site) -> None:
    """Even the user's own template cannot run code: Jinja's sandbox refuses the attribute
    walk, the built-in template is used, and the alert still goes out."""
    pwned = site.root / "PWNED"
    alerts = _logfile_site(site)
    (site.root / "tpl").mkdir(mode=0o700)
    (site.root / "tpl" / "logfile.txt.j2").write_text(PAYLOAD % pwned)
    done = site.watchdogs("run", "--once")
    assert not pwned.exists()
    assert "disk on fire" in alerts.read_text()            # delivered, with the built-in template
    assert "is broken" in done.stderr + done.stdout and "unsafe" in done.stderr + done.stdout


def test_a_world_writable_templates_folder_is_refused_with_owner_mode_and_fix(site: Site) -> None:
    _logfile_site(site)
    (site.root / "tpl").mkdir()
    (site.root / "tpl").chmod(0o777)
    done = site.watchdogs("validate")
    assert done.returncode == 2
    assert f"{site.root / 'tpl'}: writable by others (mode 0777)" in done.stdout + done.stderr
    assert f"chmod go-w {site.root / 'tpl'}" in done.stdout + done.stderr


def test_a_world_writable_resubmit_script_is_refused_at_validate(site: Site) -> None:
    train = site.root / "train.slurm"
    train.write_text("#!/bin/sh\nsleep 1\n")
    train.chmod(0o777)
    site.write_config('[[check]]\nname = "t"\ntype = "job"\njob_name = "t"\nresubmit = "train.slurm"\n')
    done = site.watchdogs("validate")
    assert done.returncode == 2
    out = done.stdout + done.stderr
    assert f"{train}: writable by others (mode 0777)" in out and f"chmod go-w {train}" in out


def test_a_resubmit_script_made_writable_after_validate_is_not_submitted(tmp_path: Path) -> None:
    from watchdogs.errors import SlurmError
    from watchdogs.slurmctl import resubmit

    train = tmp_path / "train.slurm"
    train.write_text("#!/bin/sh\nsleep 1\n")
    train.chmod(0o666)
    calls: list[list[str]] = []

    def runner(argv: list[str], **_: object) -> object:   # sbatch must never be asked
        calls.append(argv)
        raise AssertionError("sbatch was run")
    with pytest.raises(SlurmError, match="not submitted, the script is not only yours.*mode 0666"):
        resubmit.submit(train, "t", None, 5.0, None, runner)  # type: ignore[arg-type]  # test runner
    assert calls == []


def test_a_world_writable_state_folder_is_refused(site: Site) -> None:
    site.state.mkdir()
    site.state.chmod(0o777)
    done = site.watchdogs("run", "--once")
    assert done.returncode == 2
    assert f"{site.state}: writable by others (mode 0777)" in done.stdout + done.stderr
    assert not (site.state / "runs").exists()                # nothing written through it


def test_a_config_others_can_write_is_refused(site: Site) -> None:
    site.config.chmod(0o666)
    done = site.watchdogs("validate")
    assert done.returncode == 2 and "writable by others (mode 0666)" in done.stdout + done.stderr


def test_a_logfile_channel_never_appends_through_another_users_symlink(tmp_path: Path) -> None:
    from notifiers.base import Message, TransportError
    from notifiers.logfile import LogfileNotifier
    from watchdogs.config.model import NotifyConfig

    victim = tmp_path / "bashrc"
    victim.write_text("")
    link = tmp_path / "train.out"
    link.symlink_to(victim)
    privileged("give-away", str(link))   # another user's symlink: only root can make one
    channel = LogfileNotifier(NotifyConfig(name="log", type="logfile", options={"path": link}))
    with pytest.raises(TransportError, match="symlink owned by uid 65534"):
        channel.notify(Message(subject="s", text="alert\n"))
    assert victim.read_text() == ""


# -- a second Unix user: root gives files away, wdtest runs the watchdog -----------------

@pytest.fixture
def user_site() -> Iterator[Path]:
    """A site folder owned by the ordinary user wdtest (root is needed to chown files to
    `nobody`, the other user; the watchdog itself then runs as wdtest)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create files owned by another user")
    try:
        wdtest = pwd.getpwnam("wdtest")
    except KeyError:
        subprocess.run(["useradd", "--create-home", "wdtest"], check=True)
        wdtest = pwd.getpwnam("wdtest")
    root = Path(tempfile.mkdtemp(prefix="wd-trust-"))
    for sub in ("", "cron.d", "cron.d/cron.hourly", "cron.d/cron.daily", "cron.d/cron.weekly"):
        (root / sub).mkdir(exist_ok=True)
        (root / sub).chmod(0o700 if sub else 0o755)
        os.chown(root / sub, wdtest.pw_uid, wdtest.pw_gid)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _as_wdtest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "wdtest", "--", sys.executable, "-m", "watchdogs",
                           "--config", str(root / "watchdogs.toml"), *args], capture_output=True,
                          text=True, timeout=120, cwd=root,
                          env={**os.environ, "HOME": str(root), "WATCHDOGS_PYTHON": sys.executable})


def _give(path: Path, uid: int, mode: int) -> None:
    os.lchown(path, uid, uid)
    if not path.is_symlink():
        path.chmod(mode)


@pytest.mark.root
def test_another_users_template_is_never_rendered(user_site: Path) -> None:
    """Root only sets the scene (a template owned by `nobody`); wdtest runs the tick."""
    wd = pwd.getpwnam("wdtest")
    pwned = user_site / "PWNED"
    (user_site / "watchdogs.toml").write_text(
        '[scheduler]\nstate_dir = "state"\njob_name = "wd-trust"\n'
        '[alerts]\nnotify = "log"\ntemplates = "tpl"\n'
        '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n')
    dropin = user_site / "cron.d" / "cron.hourly" / "failing"
    dropin.write_text(script("echo disk on fire; exit 2"))
    for path, mode in ((user_site / "watchdogs.toml", 0o600), (dropin, 0o700)):
        _give(path, wd.pw_uid, mode)
    tpl = user_site / "tpl"
    tpl.mkdir()
    _give(tpl, wd.pw_uid, 0o755)
    (tpl / "logfile.txt.j2").write_text("OWNED BY NOBODY {{ events }}\n" + PAYLOAD % pwned)
    _give(tpl / "logfile.txt.j2", NOBODY, 0o644)
    done = _as_wdtest(user_site, "run", "--once")
    alerts = (user_site / "alerts.log").read_text()
    assert not pwned.exists()
    assert "disk on fire" in alerts and "OWNED BY NOBODY" not in alerts
    assert "owned by nobody (uid 65534)" in done.stdout + done.stderr
    assert (user_site / "alerts.log").stat().st_uid == wd.pw_uid


@pytest.mark.root
def test_runs_and_locks_replaced_by_another_users_symlinks_are_refused(user_site: Path) -> None:
    wd = pwd.getpwnam("wdtest")
    (user_site / "watchdogs.toml").write_text(
        '[scheduler]\nstate_dir = "state"\njob_name = "wd-trust"\n')
    _give(user_site / "watchdogs.toml", wd.pw_uid, 0o600)
    state, elsewhere = user_site / "state", user_site / "elsewhere"
    for folder in (state, elsewhere):
        folder.mkdir()
        _give(folder, wd.pw_uid if folder == state else NOBODY, 0o700 if folder == state else 0o777)
    (state / "runs").symlink_to(elsewhere)
    _give(state / "runs", NOBODY, 0)
    done = _as_wdtest(user_site, "run", "--once")
    assert done.returncode == 2
    assert f"{state / 'runs'}: a symlink owned by nobody (uid 65534)" in done.stdout + done.stderr
    assert list(elsewhere.iterdir()) == []                   # nothing written where nobody chose


def test_a_ca_file_others_can_write_disables_that_channel_alone(site: Site) -> None:
    """Whoever can write the CA file can read and change everything the channel sends."""
    ca = site.root / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    ca.chmod(0o666)
    site.write_config('[[notify]]\nname = "wh"\ntype = "webhook"\nurl = "https://127.0.0.1:9/x"\n'
                      'ca_file = "ca.pem"\n' + '[[notify]]\nname = "log"\ntype = "logfile"\npath = "a.log"\n')
    site.dropin("disk", script("echo disk on fire; exit 2"))
    done = site.watchdogs("run", "--once")
    disabled = next(line for line in done.stdout.splitlines() if line.startswith("DISABLED channel wh: "))
    assert str(site.config) in disabled and "key 'ca_file'" in disabled, disabled
    assert f"{ca}: writable by others (mode 0666)" in done.stdout
    assert "alert channel wh is disabled" in (site.root / "a.log").read_text()


def test_the_chain_never_submits_a_batch_script_others_can_write(tmp_path: Path) -> None:
    from watchdogs.errors import SlurmError
    from watchdogs.scheduler.chain import ChainSettings, submit_instance

    script_path = tmp_path / "cron-scheduler.slurm"
    script_path.write_text("#!/bin/sh\n")
    script_path.chmod(0o666)
    calls: list[object] = []

    def runner(argv: list[str], **_: object) -> object:
        calls.append(argv)
        raise AssertionError("sbatch was run")
    settings = ChainSettings(tmp_path / "watchdogs.toml", tmp_path / "state", tmp_path / "STOP", "wd")
    with pytest.raises(SlurmError, match="batch script is not only yours.*mode 0666"):
        submit_instance(settings, script_path, None, 0, {}, runner)  # type: ignore[arg-type]  # recording runner
    assert calls == []

