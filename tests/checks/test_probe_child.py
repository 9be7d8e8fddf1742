"""The probe child (watchdogs.fsprobe.worker) starts light and cannot be hijacked by the
folder the scheduler happens to run in."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from watchdogs.fsprobe.bounded import probe, probe_argv


def test_a_watchdogs_folder_in_the_current_directory_does_not_replace_the_probe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m` and `-c` put the current directory first on sys.path: a folder named
    `watchdogs` there (a user's checkout, a state folder) would be imported instead of ours."""
    fake = tmp_path / "watchdogs"
    (fake / "fsprobe").mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('the wrong watchdogs was imported')\n")
    (fake / "fsprobe" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    answer = probe("statvfs", {"path": str(tmp_path)}, 30, "test")
    assert answer["bytes_total"] > 0 and answer["inodes_total"] > 0


def test_the_probe_child_starts_without_site_and_loads_only_the_standard_library(tmp_path: Path) -> None:
    """No `site` (no site-packages, no editable-install hook) and only the modules its
    operation needs: the child is started for every probe of every check."""
    (tmp_path / "a.log").write_text("x\n")
    argv = probe_argv("newest", {"pattern": str(tmp_path / "*.log")})
    assert argv[1] == "-S"
    traced = [argv[0], "-X", "importtime", *argv[1:]]  # the same child, listing what it imports
    out = subprocess.run(traced, capture_output=True, text=True, timeout=30, check=True)
    assert json.loads(out.stdout)["result"]["path"] == str(tmp_path / "a.log")
    loaded = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "site" not in loaded
    ours = {m for m in loaded if m.split(".")[0] in ("watchdogs", "trainguard", "notifiers")}
    # watchdogs.filekind (os and stat only): a match is judged by its kind before it is read.
    assert ours == {"watchdogs", "watchdogs.fsprobe", "watchdogs.fsprobe.worker", "watchdogs.filekind"}
    assert not loaded & {"psutil", "jinja2", "requests", "subprocess", "dataclasses", "pathlib"}
