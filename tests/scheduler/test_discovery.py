"""Which files under cron.d run, which are skipped silently and which are refused loudly."""
from __future__ import annotations

from pathlib import Path

from tests.helpers import privileged
from tests.scheduler.conftest import PLUGIN, Site, script
from watchdogs.config.model import CronPeriods
from watchdogs.dropins.crontab import parse_crontab
from watchdogs.dropins.discovery import discover

PERIODS = CronPeriods(hourly=2.0, daily=3600.0, weekly=7 * 86400.0)


def ids(site: Site) -> list[str]:
    return sorted(d.id for d in discover(site.cron, PERIODS).dropins)


def test_leftovers_and_non_executables_are_skipped_silently(site: Site) -> None:
    site.dropin("check_gpu", script("echo ok"))
    for name in (".hidden", "check_gpu~", "check_gpu.swp", "check_gpu.bak", "check_gpu.dpkg-old",
                 "check_gpu.rpmnew", "#check_gpu#"):
        site.dropin(name, script("echo leftover"))
    site.dropin("README", "notes\n", mode=0o600)
    found = discover(site.cron, PERIODS)
    assert [d.id for d in found.dropins] == ["cron.hourly/check_gpu"]
    assert found.refused == ()


def test_group_writable_dropin_is_refused_with_its_mode(site: Site) -> None:
    site.dropin("shared", script("echo hi"), mode=0o770)
    found = discover(site.cron, PERIODS)
    assert found.dropins == ()
    assert [(Path(r.path).name, r.reason) for r in found.refused] == [
        ("shared", "writable by group (mode 0770)")]


def test_dropin_owned_by_someone_else_is_refused(site: Site) -> None:
    path = site.dropin("theirs", script("echo hi"))
    privileged("give-away", str(path))  # a file another user owns: only root can make one
    found = discover(site.cron, PERIODS)
    assert found.dropins == ()
    assert "owned by uid 65534" in found.refused[0].reason


def test_world_writable_folder_refuses_everything_in_it(site: Site) -> None:
    site.dropin("fine", script("echo hi"))
    (site.cron / "cron.hourly").chmod(0o777)
    found = discover(site.cron, PERIODS)
    assert found.dropins == ()
    assert "folder writable by others" in found.refused[0].reason


def test_slurm_file_is_submitted_not_run(site: Site) -> None:
    site.dropin("cleanup.slurm", "#!/bin/bash\n#SBATCH --time=1\ntrue\n", folder="cron.daily", mode=0o600)
    (dropin,) = discover(site.cron, PERIODS).dropins
    assert (dropin.id, dropin.kind, dropin.submit, dropin.schedule.seconds) == (
        "cron.daily/cleanup.slurm", "slurm", True, 3600.0)


def test_header_line_sets_the_timeout_and_a_bad_one_is_refused(site: Site) -> None:
    site.dropin("quick", script("# watchdogs: timeout=45s\necho hi"))
    site.dropin("wrong", script("# watchdogs: timeout=soon\necho hi"))
    found = discover(site.cron, PERIODS)
    assert [(d.id, d.timeout) for d in found.dropins] == [("cron.hourly/quick", 45.0)]
    assert "header line: expected a duration" in found.refused[0].reason


def test_symlink_to_a_system_plugin_is_accepted(site: Site) -> None:
    (site.cron / "cron.hourly" / "check_disk").symlink_to(PLUGIN)
    assert ids(site) == ["cron.hourly/check_disk"]


def test_crontab_lines_become_items_and_bad_lines_are_refused_by_line(site: Site) -> None:
    site.dropin("mine.sh", script("echo hi"), folder="scripts")
    site.crontab("# comment\n"
                 "*/5 * * * * timeout=2m " + PLUGIN + " -w '10%' -c 5% -p /\n"
                 "@every 10s name=local scripts/mine.sh --flag\n"
                 "* * * * 9 /bin/true\n"
                 "@hourly /nonexistent/tool\n")
    found = discover(site.cron, PERIODS)
    items = {d.id: d for d in found.dropins}
    assert sorted(items) == ["crontab/check_disk", "crontab/local"]
    assert items["crontab/check_disk"].argv == (PLUGIN, "-w", "10%", "-c", "5%", "-p", "/")
    assert items["crontab/check_disk"].timeout == 120.0
    assert items["crontab/local"].argv == (str(site.cron / "scripts" / "mine.sh"), "--flag")
    reasons = sorted(r.path.rsplit(":", 1)[1] for r in found.refused)
    assert reasons == ["4", "5"]


def test_crontab_never_goes_through_a_shell() -> None:
    entries, problems = parse_crontab("@hourly /bin/echo $HOME; rm -rf / | cat\n", Path("/x"))
    assert problems == []
    assert entries[0].argv == ("/bin/echo", "$HOME;", "rm", "-rf", "/", "|", "cat")


def test_same_command_twice_gets_distinct_names() -> None:
    entries, _ = parse_crontab("@hourly /bin/true\n@daily /bin/true\n", Path("/x"))
    assert [e.name for e in entries] == ["true", "true-2"]


def test_group_writable_crontab_runs_none_of_its_lines(site: Site) -> None:
    site.crontab("@hourly /bin/true\n").chmod(0o620)
    found = discover(site.cron, PERIODS)
    assert found.dropins == ()
    assert "none of its lines run" in found.refused[0].reason
