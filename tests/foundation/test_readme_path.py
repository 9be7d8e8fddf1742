"""The README's "On your real cluster in 5 minutes" (docs/getting-started.md shows the same),
walked word for word on a fresh copy of
the checkout (its tracked files only, as a clone has them) on the dev cluster, as the user:
every command after `make install` runs as shown (with this venv's `watchdogs` for
`.venv/bin/watchdogs`), and each ends as a new user expects: the copied example validates,
`doctor` finds nothing wrong here or on a compute node once the dead man's switch is set
(the path's one edit, `heartbeat_url`, made here as the user would, pointing at a local
stand-in for healthchecks.io), `run --once` and `status` report
the example's training as gone (it does not run here) and run none of the example drop-ins
(they are off until copied out of cron.d/examples/), and `start` starts the chain.
The chain is stopped at the end."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.foundation.test_readme import README, ROOT, blocks
from tests.notifiers.fakes import FakeHTTP

pytestmark = pytest.mark.slurm
# What a new user sees from each step: its exit code (Nagios codes for doctor, run and
# status: the example's training `train-7b` does not run here, a CRITICAL "gone").
EXPECTED = {"validate": 0, "doctor": 0, "run": 2, "start": 0, "status": 2}


GETTING_STARTED = ROOT / "docs" / "getting-started.md"


def five_minutes(page: Path = README) -> list[str]:
    section = page.read_text().split("## On your real cluster in 5 minutes", 1)[1]
    first = next(b for b in blocks(section) if b.lang == "sh")
    return [ln.split("#", 1)[0].strip() for ln in first.text.splitlines() if ln.split("#", 1)[0].strip()]


def fresh_copy(folder: Path) -> Path:
    """The tracked files of the checkout, as `git clone` gives them (no venv, no state)."""
    listed = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(ROOT), "ls-files", "-z"],
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = ROOT / name, folder / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return folder


HEARTBEAT_STEP = "# in watchdogs.toml, [scheduler] heartbeat_url: your dead man's switch (see below)"


def set_heartbeat(config: Path, url: str) -> None:
    """The path's edit: the dead man's switch's URL under [scheduler]."""
    text = config.read_text()
    config.write_text(text.replace("[scheduler]\n", f'[scheduler]\nheartbeat_url = "{url}"\n', 1))


@pytest.fixture
def hc() -> Iterator[FakeHTTP]:
    with FakeHTTP() as server:
        yield server


@pytest.fixture
def clone(slurm_cluster: Path, tmp_path: Path) -> Iterator[Path]:
    folder = fresh_copy(tmp_path / "slurm-watchdogs")
    try:
        yield folder
    finally:
        subprocess.run([sys.executable, "-m", "watchdogs", "--config", "watchdogs.toml", "stop"],
                       cwd=folder, capture_output=True, timeout=120, check=False)


def test_the_path_names_the_steps_this_test_walks_and_the_getting_started_page_shows_it_too() -> None:
    steps = five_minutes()
    assert five_minutes(GETTING_STARTED) == steps
    assert steps[0].startswith("git clone ") and steps[1] == "make install"
    assert steps[2] == "cp watchdogs.example.toml watchdogs.toml"
    for page in (README, GETTING_STARTED):  # the edit after the copy: a comment, not a command
        block = page.read_text().split("## On your real cluster in 5 minutes", 1)[1]
        assert f"watchdogs.toml   # or start from the minimal file below\n{HEARTBEAT_STEP}\n" in block
    assert [shlex.split(s)[1:] for s in steps[3:]] == [
        ["validate", "--config", "watchdogs.toml"], ["doctor", "--config", "watchdogs.toml"],
        ["doctor", "--on-node", "--config", "watchdogs.toml"],
        ["run", "--once", "--config", "watchdogs.toml"],
        ["start", "--config", "watchdogs.toml"], ["status", "--config", "watchdogs.toml"]]


@pytest.mark.timeout(300)
def test_the_five_minute_path_works_word_for_word_on_a_fresh_clone(clone: Path, hc: FakeHTTP) -> None:
    steps = five_minutes()
    # `git clone` and `make install`: the copy above and the venv running this test.
    env = {**os.environ, "COLUMNS": "200"}
    said = {}
    for step in steps[2:]:
        argv = shlex.split(step)
        if argv[0] == ".venv/bin/watchdogs":
            argv = [sys.executable, "-m", "watchdogs", *argv[1:]]
        done = subprocess.run(argv, cwd=clone, capture_output=True, text=True, timeout=180, env=env)
        output = done.stdout + done.stderr
        said[step] = output
        command = argv[3] if argv[0] == sys.executable else argv[0]
        if command in EXPECTED:
            assert done.returncode == EXPECTED[command], f"{step} exited {done.returncode}:\n{output}"
        assert "Traceback" not in output, f"{step}:\n{output}"
        if argv[0] == "cp":
            set_heartbeat(clone / "watchdogs.toml", f"{hc.url}/ping/readme-path")
    doctors = [out for step, out in said.items() if " doctor " in step]
    assert all(out.startswith("DOCTOR OK:") for out in doctors), doctors
    assert re.search(r"OK +channel train-log +test message delivered", doctors[1]), doctors[1]
    run = next(out for step, out in said.items() if " run " in step)
    assert re.search(r"CRITICAL train-7b: gone: no job with name 'train-7b'", run), run
    assert "will retry" not in run, run  # every channel of the example delivers at once
    # The checkout's example drop-ins are off (cron.d/examples/): none runs, none submits a job.
    assert not re.search(r"cron\.(hourly|daily|weekly)/|node-report|submitted job", run), run
    assert (clone / "watchdogs-alerts.log").read_text().count("WATCHDOGS CRITICAL train-7b") >= 1
    started = next(out for step, out in said.items() if " start " in step)
    assert re.search(r"submitted watchdogs-cron as job \d+", started), started
    status = said[steps[-1]]
    assert status.startswith("WATCHDOGS CRITICAL: 1 open alert (1 CRITICAL)"), status
    assert not re.search(r"cron\.(hourly|daily|weekly)/", status), status
