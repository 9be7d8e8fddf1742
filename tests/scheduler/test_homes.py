"""The cron-like homes without a cluster: our block in a user's crontab (the user's lines
kept, replaced whole, removed whole), what `scrontab -l`/`crontab -l` answers mean, the
systemd units, and the home run itself: it takes the state's lock without waiting, so a
run that finds the chain or another home ticking runs nothing and sends nothing."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.scheduler.conftest import Site, script
from tests.state.test_state_design import failing_site, lines
from watchdogs.scheduler import homes
from watchdogs.scheduler.lock import Lock
from watchdogs.scheduler.records import Records
from watchdogs.state.store import StateStore

USERS = "MAILTO=me@example.org\n# my backups\n0 3 * * * /home/me/backup.sh\n"


def test_the_block_joins_the_users_lines_replaces_itself_and_leaves_them_on_removal() -> None:
    line = homes.command(Path("/home/me/my watchdogs.toml"), "cron", "/home/me/sw/.venv/bin/python")
    assert line == ("WATCHDOGS_CONFIG='/home/me/my watchdogs.toml' /home/me/sw/.venv/bin/python -m watchdogs "
                    "--config '/home/me/my watchdogs.toml' run --once --due --home cron")
    first = homes.merge(USERS, homes.block("cron", line))
    assert first.startswith(USERS) and first.count("# >>> slurm-watchdogs") == 1
    assert f"* * * * * {line}\n# <<< slurm-watchdogs <<<\n" in first
    again = homes.merge(first, homes.block("cron", line.replace("cron", "cron ")))
    assert again.count("# >>> slurm-watchdogs") == 1 and homes.installed(again)
    assert homes.strip(again) == USERS and not homes.installed(homes.strip(again))


def test_the_scrontab_block_asks_for_a_small_short_job_where_sbatch_variables_say() -> None:
    env = {"SBATCH_PARTITION": "shared", "SBATCH_QOS": "cron"}
    scron = homes.scron_options("wd", Path("/s/scheduler"), env)
    assert scron == ("#SCRON --job-name=wd-scron --time=00:05:00 --mem=256M --cpus-per-task=1 "
                     "--output=/s/scheduler/scron-%j.out --open-mode=append --partition=shared --qos=cron")
    text = homes.block("scrontab", "x", scron)
    assert text.splitlines()[1] == scron and text.splitlines()[2] == "* * * * * x"


def done(code: int, out: str = "", err: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["scrontab", "-l"], code, out, err)


def test_what_a_listing_says_about_a_home() -> None:
    assert not homes.judge_listing("scrontab", None).works
    assert homes.judge_listing("scrontab", None).why == "no scrontab command here"
    said = "scrontab: fatal: scrontab is disabled on this cluster"  # 24.11, recorded
    disabled = homes.judge_listing("scrontab", done(1, err=said))
    assert not disabled.works and "disabled on this cluster" in disabled.why
    assert homes.judge_listing("scrontab", done(1, err="no crontab for wdtest")).works
    assert homes.judge_listing("cron", done(0, out=USERS)).works
    said = "You (wdtest) are not allowed to use this program (crontab)"
    denied = homes.judge_listing("cron", done(1, err=said))
    assert not denied.works and "not allowed" in denied.why


def test_the_timer_runs_the_line_every_minute_and_catches_up_after_sleep() -> None:
    units = homes.timer_units("A='x y' /py -m watchdogs run --once --due --home timer")
    assert "ExecStart=/bin/sh -c 'A='\"'\"'x y'\"'\"' /py" in units["watchdogs.service"]
    assert "OnCalendar=*-*-* *:*:00" in units["watchdogs.timer"]
    assert "Persistent=true" in units["watchdogs.timer"]


def test_a_home_run_while_another_holds_the_state_runs_nothing_and_sends_nothing(site: Site) -> None:
    failing_site(site)
    marker = site.root / "ran"
    site.dropin("mark", script(f"touch {marker}"))
    lock = Lock(site.state)
    site.state.mkdir(mode=0o700, exist_ok=True)
    assert lock.acquire("job 4242 (chain)") is None
    try:
        skipped = site.watchdogs("run", "--once", "--due", "--home", "cron")
    finally:
        lock.release()
    assert skipped.returncode == 0, skipped.stderr
    said = skipped.stdout
    assert said.startswith("SKIPPED  another home holds the state: job 4242 (chain)"), said
    assert not marker.exists() and lines(site) == []


def test_home_runs_tick_with_one_state_and_alert_once(site: Site) -> None:
    failing_site(site)
    first = site.watchdogs("run", "--once", "--due", "--home", "cron")
    # The channels carry the result; the exit code says only that the run was made (a
    # nonzero one would mark every minute's scrontab job FAILED in sacct).
    assert first.returncode == 0 and "CRITICAL cron.hourly/fire: disk on fire" in first.stdout, first.stdout
    second = site.watchdogs("run", "--once", "--home", "scrontab")
    assert second.returncode == 0 and "CRITICAL cron.hourly/fire" in second.stdout, second.stdout
    assert sum("CRITICAL cron.hourly/fire" in line for line in lines(site)) == 1, lines(site)
    store = StateStore(site.state)
    modes = [row[0] for row in store.connection().execute("SELECT mode FROM sched_instances ORDER BY id")]
    assert modes == ["cron", "scrontab"]
    home = store.kv_get("state", "home")
    assert home is not None and (home["kind"], home["period"]) == ("scrontab", 60.0)
    latest = Records(store).latest_instance()
    assert latest is not None and latest["ended"] is not None and latest["reason"] == "home run (scrontab)"
    stopped = site.watchdogs("stop")
    assert stopped.returncode in (0, 3), stopped.stderr
    after = site.watchdogs("run", "--once", "--due", "--home", "cron")
    assert after.stdout.startswith("SKIPPED  stopped by `watchdogs stop`"), after.stdout


def test_a_home_run_with_a_broken_config_tells_the_last_good_channels_once_and_resolves(site: Site) -> None:
    failing_site(site)
    assert site.watchdogs("run", "--once", "--due", "--home", "cron").returncode == 0
    good = site.config.read_text()
    site.config.write_text(good.replace("[cron]", "[cron"))
    for _ in range(2):   # two minutes of a cron: one alert, not one per run
        broken = site.watchdogs("run", "--once", "--due", "--home", "cron")
        assert broken.returncode == 2 and "Traceback" not in broken.stderr, broken.stderr
        assert broken.stdout.startswith(f"CONFIG   {site.config} does not load:"), broken.stdout
    told = [line for line in lines(site) if "watchdogs:config" in line]
    assert len(told) == 1 and "CRITICAL" in told[0], lines(site)
    site.config.write_text(good)
    assert site.watchdogs("run", "--once", "--due", "--home", "cron").returncode == 0
    told = [line for line in lines(site) if "watchdogs:config" in line]
    assert len(told) == 2 and "RESOLVED" in told[1], told


@pytest.mark.skipif(shutil.which("crontab") is None, reason="no crontab command here (Debian's cron package)")
def test_start_home_cron_keeps_the_users_own_lines_and_stop_removes_only_ours(site: Site) -> None:
    before = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=False)
    saved = before.stdout if before.returncode == 0 else None
    subprocess.run(["crontab", "-"], input=USERS, text=True, check=True)
    try:
        started = site.watchdogs("start", "--home", "cron")
        assert started.returncode == 0, started.stderr
        assert "installed the cron home: every minute" in started.stdout
        listed = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True).stdout
        assert listed.startswith(USERS) and f"--config {site.config} run --once --due --home cron" in listed
        stopped = site.watchdogs("stop")
        assert "removed the cron home" in stopped.stdout, stopped.stdout + stopped.stderr
        after = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True).stdout
        assert after == USERS
    finally:
        if saved is None:
            subprocess.run(["crontab", "-r"], capture_output=True, check=False)
        else:
            subprocess.run(["crontab", "-"], input=saved, text=True, check=False)
