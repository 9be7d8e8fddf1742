"""A group-shared project space is a supported setup: the user works under `umask 002` (as
such spaces ask), and a group mate (`wdpeer`, tests/helpers.as_peer) can write the shared
folders. The watchdog's own folders and files come out private whatever the umask, it never
refuses a folder for a mode it set itself, and nothing a group mate plants in a shared
folder it writes into (metrics_dir, the report page's folder) is ever written through."""
from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import as_peer
from tests.scheduler.conftest import Site, script


@pytest.fixture
def umask_002() -> Iterator[None]:
    """This process and every command it starts run under `umask 002`."""
    old = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(old)


def modes_under(top: Path) -> dict[str, int]:
    found = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder) / name
            found[str(path.relative_to(top))] = os.lstat(path).st_mode
    return found


def test_under_umask_002_every_command_keeps_working_and_what_it_makes_is_private(
        site: Site, umask_002: None) -> None:
    """The state folder and its missing parents made by the watchdog, then every command
    twice: nothing exits 2 for "writable by group", every folder made is 0700, and no file
    is writable by the group (the first version made them 0775 and refused them at once)."""
    site.config.write_text(f'[scheduler]\nstate_dir = "space/team/wd"\ntick = "1s"\n'
                           f'job_name = "{site.job_name}"\n[cron]\nhourly = "2s"\n')
    site.dropin("fire", script("echo 'disk on fire'\nexit 2"))
    for _ in range(2):
        for argv in (("run", "--once"), ("status",), ("silence", "cron.hourly/*", "--for", "1h"),
                     ("silences",), ("alerts",)):
            done = site.watchdogs(*argv)
            assert "writable by group" not in done.stdout + done.stderr and done.returncode in (0, 2), \
                (argv, done.returncode, done.stdout, done.stderr)
    made = modes_under(site.root / "space")
    assert "team/wd/runs/cron.hourly/fire" in made and "team/wd/inbox/done" in made, sorted(made)
    folders = {p: stat.S_IMODE(m) for p, m in made.items() if stat.S_ISDIR(m)}
    assert set(folders.values()) == {0o700}, folders
    assert stat.S_IMODE((site.root / "space").stat().st_mode) == 0o700
    loose = {p: oct(stat.S_IMODE(m)) for p, m in made.items() if not stat.S_ISDIR(m) and m & 0o022}
    assert loose == {}, loose


def test_the_default_state_folder_under_a_fresh_home_is_made_private_level_by_level(
        site: Site, umask_002: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`~/.local/state/watchdogs` with none of `.local/state` there yet: each level 0700,
    so the trust check of the folders above it passes at the next command."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    site.config.write_text(f'[scheduler]\ntick = "1s"\njob_name = "{site.job_name}"\n')
    for _ in range(2):
        done = site.watchdogs("run", "--once")
        assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: a "nothing configured" note
        assert "writable by group" not in done.stdout + done.stderr
    for level in (".local", ".local/state", ".local/state/watchdogs"):
        assert stat.S_IMODE((home / level).stat().st_mode) == 0o700, level


def test_folders_an_earlier_version_made_0775_are_tightened_once_and_said(site: Site) -> None:
    """The watchdog's own subfolders as the first version left them under umask 002 (0775,
    or 2775 under a setgid project folder) are set to 0700 by the next command, which says
    so once; any other mode others can write is still refused, with the fix."""
    for sub, mode in (("runs", 0o775), ("runs/cron.hourly", 0o775), ("locks", 0o2775),
                      ("inbox", 0o775), ("inbox/done", 0o2775), ("scheduler", 0o775)):
        (site.state / sub).mkdir(parents=True, exist_ok=True)
        (site.state / sub).chmod(mode)
    site.state.chmod(0o700)
    first = site.watchdogs("status")
    assert first.returncode != 2 or "writable by group" not in first.stderr, first.stderr
    assert first.stderr.count("made by an earlier version under umask 002; now 0700") == 6, first.stderr
    for sub in ("runs", "runs/cron.hourly", "locks", "inbox", "inbox/done", "scheduler"):
        assert stat.S_IMODE((site.state / sub).stat().st_mode) == 0o700, sub
    assert "umask 002" not in site.watchdogs("status").stderr
    (site.state / "locks").chmod(0o777)
    refused = site.watchdogs("status")
    assert refused.returncode == 2 and f"chmod go-w {site.state / 'locks'}" in refused.stderr, refused.stderr
    assert stat.S_IMODE((site.state / "locks").stat().st_mode) == 0o777


def test_links_a_group_mate_plants_in_a_shared_metrics_dir_are_never_written_through(
        site: Site, peer: str) -> None:
    """metrics_dir shared with the group (2775, as node_exporter textfile folders often
    are): the group mate plants links to a private file of yours at the old predictable
    temporary names and at watchdogs.prom itself. Your file keeps its bytes and its mode;
    watchdogs.prom is a regular file of yours, 0644; `validate` warns about the folder."""
    shared = site.root / "textfiles"
    shared.mkdir()
    shared.chmod(0o2775)
    victim = site.root / "secret.txt"
    victim.write_text("mine\n")
    victim.chmod(0o600)
    site.write_config(f'metrics_dir = "{shared}"\n')
    first = _next_pid()
    for pid in range(first, first + 8):
        as_peer("symlink", shared / f".watchdogs.prom.{pid}.tmp", str(victim))
    as_peer("symlink", shared / "watchdogs.prom", str(victim))
    for _ in range(2):
        done = site.watchdogs("run", "--once")
        assert done.returncode in (0, 1), done.stdout + done.stderr
    assert victim.read_text() == "mine\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    prom = os.lstat(shared / "watchdogs.prom")
    assert stat.S_ISREG(prom.st_mode) and prom.st_uid == os.getuid() and stat.S_IMODE(prom.st_mode) == 0o644
    assert "watchdogs_" in (shared / "watchdogs.prom").read_text()
    warned = site.watchdogs("validate")
    assert warned.returncode == 0 and f"metrics_dir: {shared} is writable by the group" in warned.stderr, \
        warned.stderr
    from watchdogs.commands.doctor.checks import check_shared_folders
    from watchdogs.config import load_config

    found = check_shared_folders(load_config(site.config))
    assert [f.status.name for f in found] == ["WARNING"] and str(shared) in found[0].summary, found


def test_a_report_page_written_into_a_shared_folder_never_follows_a_planted_link(
        site: Site, peer: str) -> None:
    shared = site.root / "www"
    shared.mkdir()
    shared.chmod(0o2775)
    victim = site.root / "secret.txt"
    victim.write_text("mine\n")
    victim.chmod(0o600)
    site.write_config()
    site.watchdogs("run", "--once")
    first = _next_pid()
    for pid in range(first, first + 8):
        as_peer("symlink", shared / f".page.html.{pid}.tmp", str(victim))
    as_peer("symlink", shared / "page.html", str(victim))
    done = site.watchdogs("report", "--out", str(shared / "page.html"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert victim.read_text() == "mine\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    page = os.lstat(shared / "page.html")
    assert stat.S_ISREG(page.st_mode) and page.st_uid == os.getuid()


def _next_pid() -> int:
    """About the pid the next process gets (the old temporary names were made from it)."""
    try:
        return int(Path("/proc/sys/kernel/ns_last_pid").read_text()) + 1
    except (OSError, ValueError):
        return os.getpid() + 1
