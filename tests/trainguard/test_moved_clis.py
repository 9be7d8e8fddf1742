"""The batch scripts' commands that moved into trainguard.recovery still answer at their old
names (a template copied from an earlier release calls them), with a notice on stderr only:
the templates parse stdout's key=value lines, so the notice must never reach it."""
from __future__ import annotations

import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", ["requeue", "inplace"])
def test_the_old_module_name_runs_the_new_command_and_says_so_on_stderr(name: str) -> None:
    old, new = run(f"trainguard.{name}", "--help"), run(f"trainguard.recovery.{name}", "--help")
    assert old.returncode == new.returncode == 0
    assert old.stdout == new.stdout, "the old name must answer exactly as the new one on stdout"
    assert f"'python -m trainguard.{name}' is deprecated" in old.stderr
    assert f"use 'python -m trainguard.recovery.{name}'" in old.stderr
    assert "deprecated" not in new.stderr


def test_an_old_name_with_bad_arguments_still_fails_as_the_new_one_does() -> None:
    old, new = run("trainguard.inplace", "after", "--no-such-flag"), run("trainguard.recovery.inplace",
                                                                            "after", "--no-such-flag")
    assert old.returncode == new.returncode == 2
    assert old.stdout == new.stdout == ""
