"""Bad keys of the built-in checks are reported with file, table, key, value and what was
expected, all at once, by the real loader and entry points."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.checks.conftest import write_config
from watchdogs.errors import ConfigError

BAD = """
[[check]]
name = "both"
type = "job"
job_name = "a"
job_regex = "a.*"

[[check]]
name = "hung"
type = "log_stale"
job = "disk"
max_age = "soon"

[[check]]
name = "counter"
type = "log_stale"
path = "x.log"
progress = "iter \\\\d+"

[[check]]
name = "disk"
type = "disk"
path = "/data"
warn = "lots"
usable = "120%"

[[check]]
name = "nodes"
type = "nodes"
min_available = "many"
"""


def test_every_problem_of_the_builtin_checks_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        write_config(tmp_path, BAD)
    problems = [str(p) for p in info.value.problems]
    text = "\n".join(problems)
    assert "check \"both\": key 'job_name' = 'a': expected exactly one of job_name or job_regex" in text
    assert "check \"hung\": key 'max_age' = 'soon': expected a duration" in text
    assert "check \"counter\": key 'progress' = 'iter \\\\d+': expected a regular expression with 1" in text
    assert "check \"disk\": key 'warn' = 'lots': expected a size" in text
    assert "check \"disk\": key 'usable' = '120%': expected a percentage" in text
    assert "check \"nodes\": key 'min_available' = 'many': expected a count" in text
    assert all(p.startswith(str(tmp_path / "watchdogs.toml")) for p in problems)


def test_log_stale_must_link_to_a_job_check_and_watch_something(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        write_config(tmp_path, """
            [[check]]
            name = "disk"
            type = "disk"
            path = "/data"
            [[check]]
            name = "hung"
            type = "log_stale"
            path = "x.log"
            job = "disk"
            [[check]]
            name = "nothing"
            type = "log_stale"
            """)
    text = "\n".join(str(p) for p in info.value.problems)
    assert "check \"hung\": key 'job' = 'disk': expected the name of a [[check]] of type \"job\"" in text
    assert "check \"nothing\": key 'path' = '(missing)': expected path (a log file or glob)" in text


def test_job_and_nodes_checks_run_every_30s_unless_told_and_other_types_every_5m(tmp_path: Path) -> None:
    config = write_config(tmp_path, """
[[check]]
name = "train"
type = "job"
job_name = "train"

[[check]]
name = "slow-train"
type = "job"
job_name = "slow"
every = "2m"

[[check]]
name = "nodes"
type = "nodes"

[[check]]
name = "scratch"
type = "disk"
path = "/tmp"
warn = "85%"
""")
    every = {c.name: c.every for c in config.checks}
    assert every == {"train": 30.0, "slow-train": 120.0, "nodes": 30.0, "scratch": 300.0}
