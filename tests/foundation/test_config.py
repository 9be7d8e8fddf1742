from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from notifiers.base import Message, Notifier
from watchdogs.checks.base import Check
from watchdogs.checks.context import TickContext
from watchdogs.config import find_config_path, load_config
from watchdogs.config.options import Limit, Option, choice, duration, limit, path, size, string
from watchdogs.errors import ConfigError, WatchdogsError
from watchdogs.plugins import Registry
from watchdogs.result import CheckResult, Status


class SpaceCheck(Check):
    type_name = "space"
    options: ClassVar[Mapping[str, Option]] = {
        "path": Option(path, required=True),
        "warn": Option(limit(size), default=Limit(percent=80.0)),
        "max_age": Option(duration, default=60.0),
    }

    def run(self, ctx: TickContext) -> CheckResult:
        return CheckResult(Status.OK, "fine")


class FollowCheck(Check):
    type_name = "follow"
    options: ClassVar[Mapping[str, Option]] = {
        "job": Option(string, required=True), "mode": Option(choice("a", "b"), default="a")}
    references = {"job": "space"}

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        if values["mode"] == "b" and values["job"] == "nope":
            return [("mode", "b", 'mode "a" when job is "nope"')]
        return []

    def run(self, ctx: TickContext) -> CheckResult:
        return CheckResult(Status.OK, "fine")


class PrintNotifier(Notifier):
    type_name = "print"
    options: ClassVar[Mapping[str, Option]] = {"prefix": Option(string, default=">")}

    def notify(self, message: Message) -> None:
        print(self.opts["prefix"], message.subject)


CHECKS = Registry("test.checks", {"space": SpaceCheck, "follow": FollowCheck}, {})
NOTIFIERS = Registry("test.notifiers", {"print": PrintNotifier}, {"broken": "ImportError: x"})


def write(tmp_path: Path, text: str) -> Path:
    cfg = tmp_path / "watchdogs.toml"
    cfg.write_text(textwrap.dedent(text))
    return cfg


def load(cfg: Path):
    return load_config(cfg, checks=CHECKS, notifiers=NOTIFIERS)


def problems_of(cfg: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(cfg)
    return [str(p) for p in info.value.problems]


def test_valid_config_is_typed_and_paths_resolve_beside_it(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
        [scheduler]
        state_dir = "state"
        [cron]
        hourly = "30s"
        [[notify]]
        name = "ops"
        type = "print"
        [[check]]
        name = "scratch"
        type = "space"
        path = "data"
        warn = "2TiB"
        every = "5m"
        notify = { critical = ["ops"] }
        [[check]]
        name = "tail"
        type = "follow"
        job = "scratch"
        """)
    config = load(cfg)
    assert config.scheduler.state_dir == tmp_path / "state"
    assert config.scheduler.cron_dir == tmp_path / "cron.d"
    assert config.scheduler.stop_file == tmp_path / "state" / "STOP"
    assert config.cron.hourly == 30 and config.cron.daily == 86400
    scratch = config.check("scratch")
    assert scratch is not None and scratch.every == 300
    assert scratch.options["path"] == tmp_path / "data"
    assert scratch.options["warn"] == Limit(amount=2 * 2**40)
    assert scratch.options["max_age"] == 60.0
    assert scratch.notify == {"critical": ("ops",)}
    assert config.notifier("ops").options["prefix"] == ">"


def test_every_problem_is_reported_at_once_naming_file_table_key_and_value(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
        [scheduler]
        tick = "soon"
        colour = "blue"
        [[check]]
        name = "scratch-disk"
        type = "space"
        path = "/scratch"
        warn = "lots"
        every = "5x"
        [[check]]
        name = "jobby"
        type = "nosuch"
        """)
    found = problems_of(cfg)
    assert len(found) == 5, found
    text = "\n".join(found)
    assert all(line.startswith(str(cfg)) for line in found)
    assert "[scheduler]: key 'tick' = 'soon': expected a duration such as" in text
    assert "[scheduler]: key 'colour' = 'blue': expected no such key here" in text
    assert 'check "scratch-disk": key \'every\' = \'5x\': expected a duration' in text
    assert 'check "scratch-disk": key \'warn\' = \'lots\': expected a size' in text
    assert "percentage" in text
    assert 'check "jobby": key \'type\' = \'nosuch\': expected one of the types registered' in text


def test_unknown_keys_in_a_check_list_the_known_ones(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
        [[check]]
        name = "s"
        type = "space"
        path = "/x"
        pth = "/y"
        """)
    (problem,) = problems_of(cfg)
    assert "key 'pth'" in problem and "path" in problem and "every" in problem


def test_required_keys_and_duplicate_names_are_reported(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
        [[check]]
        name = "s"
        type = "space"
        [[check]]
        name = "s"
        type = "space"
        path = "/x"
        [[check]]
        type = "space"
        path = "/y"
        """)
    text = "\n".join(problems_of(cfg))
    assert "check \"s\": key 'path'" in text and "required" in text
    assert "key 'name' = 's': expected a name no other [[check]] uses" in text
    assert "check #3: key 'name'" in text


def test_references_to_channels_and_checks_must_exist(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
        [alerts]
        notify = ["pager"]
        [[check]]
        name = "f"
        type = "follow"
        job = "missing"
        notify = { warning = ["slack"] }
        """)
    text = "\n".join(problems_of(cfg))
    assert "[alerts]: key 'notify' = 'pager': expected the name of a [[notify]] channel" in text
    assert "check \"f\": key 'notify' = 'slack'" in text
    assert "check \"f\": key 'job' = 'missing': expected the name of a [[check]] of type \"space\"" in text


def test_cross_key_rules_of_a_check_type_are_applied(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
        [[check]]
        name = "f"
        type = "follow"
        job = "nope"
        mode = "b"
        """)
    text = "\n".join(problems_of(cfg))
    assert "key 'mode' = 'b': expected mode \"a\" when job is \"nope\"" in text


def test_a_plugin_that_fails_to_import_is_named_with_its_error(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
        [[notify]]
        name = "x"
        type = "broken"
        """)
    (problem,) = problems_of(cfg)
    assert "a loadable plugin (ImportError: x)" in problem


def test_toml_syntax_errors_name_the_file_line_column_and_what_is_wrong(tmp_path: Path) -> None:
    cfg = write(tmp_path, "[scheduler]\ntick = soon\n")
    (problem,) = problems_of(cfg)
    assert problem == (f"{cfg}: line 2, column 8: TOML syntax error: invalid value, in: tick = soon")
    assert "valid TOML" not in problem


def test_unknown_top_level_tables_and_wrong_shapes(tmp_path: Path) -> None:
    cfg = write(tmp_path, """
        check = "oops"
        [schedular]
        tick = "1s"
        """)
    text = "\n".join(problems_of(cfg))
    assert "top level: key 'schedular'" in text
    assert "write [[check]]" in text


def test_config_is_found_by_flag_then_env_then_cwd(tmp_path: Path) -> None:
    here = write(tmp_path, "")
    assert find_config_path("/a.toml", env={"WATCHDOGS_CONFIG": "/b.toml"}) == Path("/a.toml")
    assert find_config_path(None, env={"WATCHDOGS_CONFIG": "/b.toml"}) == Path("/b.toml")
    assert find_config_path(None, env={}, cwd=tmp_path) == here
    with pytest.raises(WatchdogsError, match="no config"):
        find_config_path(None, env={}, cwd=tmp_path / "nowhere")
