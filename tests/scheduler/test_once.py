"""`watchdogs run --once [--due]` through the real command line: one line per item, the
worst status as the exit code, real plugins, pruning."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.scheduler.conftest import PLUGIN, Site, script
from watchdogs.scheduler.records import Records
from watchdogs.state.store import StateStore


def test_once_prints_a_line_per_item_and_exits_with_the_worst_status(site: Site) -> None:
    site.dropin("ok", script("echo 'all fine'"))
    site.dropin("warn", script("echo 'GPU 2 idle | idle=2'\nexit 1"), folder="cron.daily")
    site.dropin("README", "not a drop-in\n", mode=0o644)
    done = site.watchdogs("run", "--once")
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == ["WARNING  cron.daily/warn: GPU 2 idle",
                                        "OK       cron.hourly/ok: all fine"]


def test_once_json_and_the_run_is_recorded_with_its_log(site: Site) -> None:
    site.dropin("ok", script("echo 'all fine'"))
    data = json.loads(site.watchdogs("run", "--once", "--json").stdout)
    (item,) = data["items"]
    assert (item["item"], item["status"], data["worst"]) == ("cron.hourly/ok", "OK", "OK")
    assert Path(item["log"]).read_text().startswith("all fine\n")
    row = Records(StateStore(site.state)).items()["cron.hourly/ok"]
    assert (row["last_summary"], row["last_log"]) == ("all fine", item["log"])


def test_due_runs_only_what_is_due(site: Site) -> None:
    site.dropin("hourly", script("echo hourly"))
    site.dropin("daily", script("echo daily"), folder="cron.daily")
    assert site.watchdogs("run", "--once").returncode == 0
    time.sleep(2.2)  # [cron] hourly = "2s": only cron.hourly is due again
    again = site.watchdogs("run", "--once", "--due")
    assert again.stdout.splitlines() == ["OK       cron.hourly/hourly: hourly"]


def test_hung_dropin_is_killed_at_its_timeout_and_reported(site: Site) -> None:
    site.dropin("hang", script("# watchdogs: timeout=1s\nsleep 600"))
    site.dropin("quick", script("echo quick"))
    started = time.monotonic()
    done = site.watchdogs("run", "--once")
    assert time.monotonic() - started < 8
    assert done.returncode == 2
    assert "CRITICAL cron.hourly/hang: killed after 1 s (timeout): process group terminated" in done.stdout
    assert "OK       cron.hourly/quick: quick" in done.stdout


def test_group_writable_dropin_is_refused_and_never_runs(site: Site) -> None:
    marker = site.root / "ran"
    site.dropin("shared", script(f"touch {marker}"), mode=0o775)
    done = site.watchdogs("run", "--once")
    assert f"REFUSED  {site.cron}/cron.hourly/shared: writable by group (mode 0775)" in done.stdout
    assert not marker.exists()
    status = site.watchdogs("status")
    assert "writable by group (mode 0775)" in status.stdout


@pytest.mark.skipif(not Path(PLUGIN).exists(), reason="monitoring-plugins-basic is not installed")
def test_debian_check_disk_as_a_crontab_dropin(site: Site) -> None:
    site.crontab(f"@hourly {PLUGIN} -w 100% -c 100% -p {site.root}\n")
    (site.cron / "cron.hourly" / "check_disk").symlink_to(PLUGIN)  # no arguments: its own usage error
    done = site.watchdogs("run", "--once")
    assert done.stdout.splitlines() == [
        "UNKNOWN  cron.hourly/check_disk: check_disk: Could not parse arguments",
        f"CRITICAL crontab/check_disk: {done.stdout.split('crontab/check_disk: ')[1].splitlines()[0]}"]
    assert done.stdout.split("crontab/check_disk: ")[1].startswith("DISK CRITICAL - free space:")
    assert done.returncode == 2


def test_old_run_logs_are_pruned(site: Site) -> None:
    site.write_config('log_retention = "1h"')
    site.dropin("ok", script("echo fine"))
    old = site.state / "runs" / "cron.hourly" / "gone" / "20200101T000000.000000Z.log"
    old.parent.mkdir(parents=True)
    old.write_text("old\n")
    week_ago = time.time() - 7 * 86400
    os.utime(old, (week_ago, week_ago))
    os.utime(old.parent, (week_ago, week_ago))
    site.watchdogs("run", "--once")
    assert not old.exists()
    assert list((site.state / "runs" / "cron.hourly" / "ok").iterdir())


def test_due_without_once_is_a_usage_error(site: Site) -> None:
    done = site.watchdogs("run", "--due")
    assert done.returncode == 2 and "--due goes with --once" in done.stderr
