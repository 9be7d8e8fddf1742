"""The CLI answers at once: `--help` imports the CLI and its command table only, and a
command imports what it needs when it runs. These pin the modules, so a heavy import
(APScheduler, asyncio, jinja2, a channel's client library, trainguard, torch) cannot
creep back unnoticed. Timings are in benchmarks/cli_startup.py, not here."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import watchdogs.commands
from watchdogs.cli import command_in, help_width, main, spelled_out_before
from watchdogs.commands import COMMANDS
from watchdogs.plugins import BUILTIN, CHECKS_GROUP, load_group

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI, as watchdogs.config.loader does
    import tomli as tomllib

HEAVY = ("apscheduler", "asyncio", "jinja2", "slack_sdk", "requests", "urllib3", "torch", "psutil",
         "trainguard", "notifiers")
# status builds the configured channels (to show the disabled ones) and the check types of
# the config, for their option tables: what a check needs to run (Slurm's parsers, the
# filesystem probes, trainguard's heartbeats) stays out, and so do the scheduler's tick,
# the alert pipeline and the entry-point scan.
STATUS_HEAVY = ("apscheduler", "asyncio", "jinja2", "slack_sdk", "requests", "urllib3", "torch",
                "notifiers.slack", "notifiers.sms", "notifiers.webhook", "notifiers.email",
                "notifiers.apprise", "apprise", "psutil", "importlib.metadata", "trainguard",
                "socket", "shutil", "watchdogs.checks.context", "watchdogs.slurmctl.squeue",
                "watchdogs.slurmctl.ending", "watchdogs.slurmctl.sacct", "watchdogs.slurmctl.sinfo",
                "watchdogs.fsprobe.usage", "watchdogs.fsprobe.scan", "watchdogs.fsprobe.forecast")
# --help needs none of what a command needs either: entry points, the state database, logs,
# the config's dataclasses.
HELP_HEAVY = (*HEAVY, "importlib.metadata", "sqlite3", "email", "logging", "tzlocal", "dataclasses",
              "inspect", "shutil")
HELP_MODULES = {"watchdogs", "watchdogs.cli", "watchdogs.commands"}
# Everything of ours that `status` loads for status_config() (the four built-in check types,
# a logfile channel): the config and the option tables of its types, the scheduler's item list and
# records, one Slurm runner, the state store, the alert summary. A module added to this path
# is a decision: add it here, and see benchmarks/cli_startup.py.
STATUS_MODULES = {
    "watchdogs", "watchdogs.cli", "watchdogs.commands", "watchdogs.commands.base",
    "watchdogs.commands.status", "watchdogs.errors", "watchdogs.redact", "watchdogs.units",
    "watchdogs.humanize", "watchdogs.ownfiles",  # through state.snapshot, whose publish writes with it
    "watchdogs.result", "watchdogs.plugins", "watchdogs.configured",
    "watchdogs.schedules", "watchdogs.textsafe", "watchdogs.procs", "watchdogs.trust",
    "watchdogs.config", "watchdogs.config.loader", "watchdogs.config.model",
    "watchdogs.config.options", "watchdogs.config.paths", "watchdogs.config.sections",
    "watchdogs.config.source", "watchdogs.config.tables",
    # the check types' option tables (job's names its endings and notice kinds)
    "watchdogs.checks", "watchdogs.checks.base", "watchdogs.checks.job",
    "watchdogs.checks.jobnotices", "watchdogs.checks.log_stale", "watchdogs.checks.disk",
    "watchdogs.checks.nodes", "watchdogs.fsprobe", "watchdogs.fsprobe.bounded",
    "watchdogs.fsprobe.answers",  # the config's folders asked with a deadline (a hung mount)
    "watchdogs.slurmctl", "watchdogs.slurmctl.resubmit", "watchdogs.slurmctl.transitions",
    "watchdogs.slurmctl.hostlist", "watchdogs.slurmctl.slurmtime",
    "notifiers", "notifiers.base", "notifiers.logfile", "notifiers.secrets",
    "watchdogs.scheduler", "watchdogs.scheduler.items", "watchdogs.scheduler.prune",
    "watchdogs.scheduler.records", "watchdogs.scheduler.statusview", "watchdogs.dropins",
    "watchdogs.dropins.crontab", "watchdogs.dropins.discovery", "watchdogs.dropins.safety",
    "watchdogs.slurmctl.runner", "watchdogs.state", "watchdogs.state.store",
    "watchdogs.alerts", "watchdogs.alerts.channels",
    # status reads the view the scheduler publishes (docs/state.md)
    "watchdogs.scheduler.changes", "watchdogs.state.snapshot",
    # status earns its OK (issues 34, 35): who watches, and the verdict it shares with the page
    "watchdogs.state.watching", "watchdogs.report", "watchdogs.report.verdict",
}
VALIDATE_MODULES = STATUS_MODULES - {
    "watchdogs.commands.status", "watchdogs.scheduler", "watchdogs.scheduler.items",
    "watchdogs.scheduler.prune", "watchdogs.scheduler.records", "watchdogs.scheduler.statusview",
    "watchdogs.dropins", "watchdogs.dropins.crontab", "watchdogs.dropins.discovery",
    "watchdogs.dropins.safety", "watchdogs.slurmctl.runner", "watchdogs.state",
    "watchdogs.state.store", "watchdogs.alerts", "watchdogs.alerts.channels",
    "watchdogs.alerts.schema", "watchdogs.schedules", "watchdogs.scheduler.changes",
    "watchdogs.state.snapshot", "watchdogs.procs",
    "watchdogs.state.watching", "watchdogs.report", "watchdogs.report.verdict",
    "watchdogs.ownfiles",  # status reaches it through the view's module (its writer side)
    # validate checks that every user and @group a `users` names exists (pwd/grp only).
} | {"watchdogs.commands.validate", "watchdogs.slurmctl.users"}

PROBE = """
import contextlib, io, json, sys
from watchdogs.cli import main
try:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(json.loads(sys.argv[1]))
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    """The modules loaded once `watchdogs ARGV` is done, in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True,
                          text=True, cwd=cwd, timeout=60, env=env, check=True)
    return set(json.loads(proc.stdout))


def heavy_in(modules: set[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy))


def ours(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in ("watchdogs", "notifiers", "trainguard")}


def test_help_imports_the_command_table_and_no_command_module(tmp_path: Path) -> None:
    loaded = modules_after("--help", cwd=tmp_path)
    assert ours(loaded) == HELP_MODULES
    assert heavy_in(loaded, HELP_HEAVY) == []
    outside = sorted(m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names
                     and m.split(".")[0] not in ("watchdogs", "__main__")
                     and not m.startswith(("_distutils_hack", "__editable__")))
    assert outside == []


def status_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "watchdogs.toml"
    cfg.write_text(f"""
[scheduler]
state_dir = "{tmp_path / 'state'}"
[[notify]]
name = "team"
type = "logfile"
path = "{tmp_path / 'alerts.log'}"
[[check]]
name = "train"
type = "job"
job_name = "train"
[[check]]
name = "train-hung"
type = "log_stale"
job = "train"
path = "{tmp_path}/train-*.out"
max_age = "30m"
heartbeats = "{tmp_path}/heartbeats"
[[check]]
name = "scratch"
type = "disk"
path = "{tmp_path}"
[[check]]
name = "nodes"
type = "nodes"
""")
    return cfg


def test_status_imports_only_the_channel_types_it_is_configured_with_and_no_apscheduler(
        tmp_path: Path) -> None:
    """status shows disabled channels, so it builds the configured ones: a logfile channel
    here; Slack's, Twilio's and the others' client libraries stay out."""
    loaded = modules_after("--config", str(status_config(tmp_path)), "status", cwd=tmp_path)
    assert "watchdogs.commands.status" in loaded  # it did run
    assert "notifiers.logfile" in loaded
    assert heavy_in(loaded, STATUS_HEAVY) == []
    assert "tzlocal" not in loaded  # every item runs on an interval: no wall-clock zone needed
    others = {f"watchdogs.commands.{m}" for m in {c.module for c in COMMANDS.values()} - {"status"}}
    assert loaded & others == set()


def test_status_and_validate_build_the_check_types_without_what_runs_a_check(tmp_path: Path) -> None:
    """The check types of the config are loaded for their option tables; what runs a check
    (the tick, squeue, sinfo and sacct parsers, heartbeat readers, filesystem probes, the
    scan) is not."""
    cfg = str(status_config(tmp_path))
    assert ours(modules_after("--config", cfg, "status", cwd=tmp_path)) == STATUS_MODULES
    assert ours(modules_after("--config", cfg, "validate", cwd=tmp_path)) == VALIDATE_MODULES


def test_status_builds_http_channels_and_shows_a_disabled_one_without_their_client_libraries(
        tmp_path: Path) -> None:
    """requests and slack_sdk are imported when a webhook, SMS or Slack message is sent, not
    when status builds the channel to see whether it works: an SMS whose token variable is
    unset is still shown DISABLED."""
    cfg = tmp_path / "watchdogs.toml"
    cfg.write_text(f"""
[scheduler]
state_dir = "{tmp_path / 'state'}"
[[notify]]
name = "hook"
type = "webhook"
url = "http://127.0.0.1:9/alerts"
[[notify]]
name = "pager"
type = "sms"
account_sid = "AC0123456789abcdef0123456789abcdef"
auth_token_env = "WATCHDOGS_TEST_UNSET_TOKEN"
from_number = "+15559990000"
to = ["+15550001111"]
[[notify]]
name = "team"
type = "slack"
webhook_url_env = "WATCHDOGS_TEST_SLACK_URL"
""")
    env = {k: v for k, v in os.environ.items() if k != "WATCHDOGS_TEST_UNSET_TOKEN"}
    env["WATCHDOGS_TEST_SLACK_URL"] = "https://hooks.slack.com/services/T0/B0/secret"
    loaded = modules_after("--config", str(cfg), "status", cwd=tmp_path, env=env)
    assert {"notifiers.webhook", "notifiers.sms", "notifiers.slack"} <= loaded
    assert heavy_in(loaded, ("requests", "urllib3", "slack_sdk", "notifiers.slack_client")) == []
    shown = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(cfg), "status"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env).stdout
    assert "!!! pager DISABLED" in shown and "WATCHDOGS_TEST_UNSET_TOKEN" in shown
    assert "hook DISABLED" not in shown and "team DISABLED" not in shown


def test_status_plans_a_cron_item_in_the_local_zone_and_an_interval_without_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """status asks tzlocal only for a cron expression: 03:00 is 03:00 where the user is."""
    import tzlocal

    from watchdogs.scheduler.statusview import _next_run
    from watchdogs.schedules import Schedule

    monkeypatch.setenv("TZ", "Asia/Tokyo")  # UTC+9 all year
    tzlocal.reload_localzone()
    try:
        anchor = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()  # 09:00 in Tokyo
        cron = SimpleNamespace(schedule=Schedule("cron", expr="0 3 * * *"))
        interval = SimpleNamespace(schedule=Schedule("interval", seconds=7200))
        assert _next_run(cron, {"anchor": anchor}, False, anchor + 3600) == anchor + 18 * 3600
        assert _next_run(interval, {"anchor": anchor}, False, anchor + 3600) == anchor + 7200
    finally:
        monkeypatch.undo()
        tzlocal.reload_localzone()


def test_the_builtin_type_table_matches_the_entry_points_in_pyproject() -> None:
    """plugins.BUILTIN spares status the entry-point scan: it must name what pyproject.toml
    declares, or a renamed class would load in one path and fail in the other."""
    declared = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    points = declared["project"]["entry-points"]
    assert {g: dict(t) for g, t in BUILTIN.items()} == {g: points[g] for g in BUILTIN}
    for group in BUILTIN:
        classes = load_group(group).classes
        assert all(classes[name].type_name == name for name in BUILTIN[group])  # type: ignore[attr-defined]  # every plugin class has type_name


def test_a_type_outside_the_builtin_table_is_found_among_the_entry_points() -> None:
    registry = load_group(CHECKS_GROUP)
    assert "no-such-type" not in registry.classes
    assert set(registry.names()) >= set(BUILTIN[CHECKS_GROUP])


def test_trainguard_still_exports_its_public_names_on_first_use() -> None:
    probe = ("import sys, trainguard; assert 'trainguard.guard' not in sys.modules; "
             "from trainguard import Guard, SAVE_AND_STOP, read_heartbeats; "
             "import trainguard.guard as g; assert Guard is g.Guard; "
             "assert set(trainguard.__all__) <= set(dir(trainguard)); "
             "print(sorted(n for n in trainguard.__all__ if getattr(trainguard, n) is None))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          check=True)
    assert proc.stdout.strip() == "[]"


class HelpsAdded:
    """The subparsers a register() is handed, recording the help of each command it adds
    (argparse keeps that help in no public attribute)."""

    def __init__(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        self.sub = sub
        self.helps: dict[str, str | None] = {}

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.helps[name] = kwargs.get("help")
        return self.sub.add_parser(name, **kwargs)


def registered_by(module_name: str) -> dict[str, str | None]:
    """Command name -> help, as the module's register() adds them."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    added = HelpsAdded(sub)
    importlib.import_module(f"watchdogs.commands.{module_name}").register(added)
    return {name: added.helps.get(name) for name in sub.choices}


def test_the_command_table_matches_what_each_module_registers() -> None:
    modules = {m.name for m in pkgutil.iter_modules(watchdogs.commands.__path__)} - {"base"}
    assert modules == {c.module for c in COMMANDS.values()}, "a command module missing from COMMANDS"
    for module in sorted(modules):
        table = {name: c.help for name, c in COMMANDS.items() if c.module == module}
        assert registered_by(module) == table, f"watchdogs.commands.{module} and COMMANDS disagree"


@pytest.mark.parametrize("columns", [None, "50", "200", "0", "wide"])
def test_help_is_as_wide_as_argparse_would_make_it_with_shutil(
        columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI asks os, not shutil, for the terminal width: the same answer."""
    import shutil

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert help_width() == shutil.get_terminal_size().columns - 2


@pytest.mark.parametrize(("argv", "command"), [
    (["status"], "status"),
    (["--json", "-c", "status", "validate"], "validate"),
    (["--config=x.toml", "-v", "alerts", "--history", "3"], "alerts"),
    (["--help"], None),
])
def test_the_command_is_found_past_global_options_and_their_values(argv: list[str],
                                                                    command: str | None) -> None:
    assert command_in(argv) == command


def test_an_option_value_that_looks_like_a_command_still_runs_the_right_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-cvalidate` is one word to argparse: the second parse finds the command it chose."""
    cfg = tmp_path / "status"
    cfg.write_text('[scheduler]\nstate_dir = "st"\n')
    assert main([f"-c{cfg}", "validate"]) == 0
    assert "valid: 0 checks" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "alone"), [
    (["status"], True),
    (["--json", "-v", "--config", "status", "--verbose", "status"], True),
    (["-cstatus", "--config=x.toml", "status", "-h"], True),
    (["-h", "status"], False),  # the list of every command
    (["--conf", "status", "validate"], False),  # argparse runs validate
    (["-vc", "status", "validate"], False),  # -v, then -c takes "status"
    (["--", "status"], False),
])
def test_the_command_is_parsed_alone_only_when_argparse_can_run_no_other(argv: list[str],
                                                                        alone: bool) -> None:
    command = command_in(argv)
    assert command is not None
    assert spelled_out_before(argv, command) is alone


def test_help_before_the_command_still_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["-h", "status"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert all(name in shown for name in COMMANDS)


def test_an_abbreviated_option_taking_a_command_name_runs_the_command_argparse_picks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`--conf status validate`: argparse reads --config=status; command_in guesses status."""
    (tmp_path / "status").write_text('[scheduler]\nstate_dir = "st"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["--conf", "status", "validate"]) == 0
    assert "valid: 0 checks" in capsys.readouterr().out


FINALISED = """
import atexit, sys
atexit.register(lambda: print("finalised", flush=True))
from watchdogs.cli import main
sys.argv = ["watchdogs", *sys.argv[1:]]
code = main() if sys.argv[1] != "in-process" else main(sys.argv[2:])
print("returned", code)
"""


@pytest.mark.parametrize(("argv", "finalised"), [
    (["status"], False),  # the program: ends itself once its output is out
    (["validate"], False),
    (["in-process", "status"], True),  # main(argv) from Python: returns
    (["silences"], True),  # a command not known to leave nothing behind: the normal exit
])
def test_status_and_validate_leave_without_the_interpreters_teardown_when_run_as_the_program(
        tmp_path: Path, argv: list[str], finalised: bool) -> None:
    cfg = status_config(tmp_path)
    proc = subprocess.run([sys.executable, "-c", FINALISED, *argv[:-1], "-c", str(cfg), argv[-1]],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert ("finalised" in proc.stdout) is finalised
    assert ("returned" in proc.stdout) is finalised
    if argv[-1] == "status":
        # Exit 2: no scheduler ever ran here, so nothing watches, and status no longer says OK
        # for that (issue 34); the whole table is still flushed.
        assert "train-hung" in proc.stdout
        assert proc.returncode == (0 if finalised else 2)  # in-process: main() returned it ("returned 2")
        assert not (tmp_path / "state" / "state.sqlite3-wal").exists()  # closed, checkpointed
