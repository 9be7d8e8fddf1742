"""A state folder on a hung mount (a real FUSE mount whose server never answers, as a dead
NFS or Lustre is): every command says so in words within seconds, never hangs. `status` is
UNKNOWN (Nagios 3) with the key and folder; `run --once` names the config key; `run` ends
with exit 3 and one log line instead of sitting blind in the chain's place."""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checks.hung_mount import fuse_available, hung_mount
from watchdogs.fsprobe import answers

WATCHDOGS = [sys.executable, "-m", "watchdogs"]


@pytest.fixture
def hung_site(tmp_path: Path) -> Iterator[Path]:
    reason = fuse_available()
    if reason:
        pytest.skip(reason)
    config = tmp_path / "watchdogs.toml"
    config.write_text('[scheduler]\nstate_dir = "mnt/state"\n')
    config.chmod(0o600)
    with hung_mount(tmp_path / "mnt"):
        yield config


def watchdogs(config: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*WATCHDOGS, "--config", str(config), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.timeout(120)
def test_status_run_once_and_run_on_a_hung_state_folder_say_so_within_seconds(hung_site: Path) -> None:
    started = time.monotonic()
    # Side by side: each waits out the same deadlines.
    running = {args: watchdogs(hung_site, *args) for args in (("status",), ("run", "--once"), ("run",))}
    done = {args: (p.communicate(timeout=60), p.returncode) for args, p in running.items()}
    took = time.monotonic() - started
    assert took < 45, took  # deadlines of 5 s (commands) and 15 s (the scheduler), twice at most

    (out, err), code = done[("status",)]
    assert code == 3, (out, err)
    first = out.splitlines()[0]
    assert first.startswith("WATCHDOGS UNKNOWN: state_dir = mnt/state: the filesystem does not answer"), first

    (out, err), code = done[("run", "--once")]
    assert code == 2, (out, err)
    assert "key 'state_dir' = 'mnt/state': expected a path on a filesystem that answers" in err, err

    (out, err), code = done[("run",)]
    assert code == 3, (out, err)
    assert f"state folder {hung_site.parent / 'mnt' / 'state'} does not answer (a hung or dead mount?)" \
        in err, err[-2000:]
    assert all("Traceback" not in e for (_, e), _ in done.values()), done


@pytest.mark.timeout(60)
def test_without_coreutils_stat_the_python_probe_tells_the_same(hung_site: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answers, "STAT_TOOLS", ())
    hung, fine = tmp_path / "mnt" / "state", tmp_path / "not-yet" / "state"
    assert answers.unanswered([fine, hung], timeout=2.0) == frozenset({hung})
    assert answers.unanswered([fine], timeout=2.0) == frozenset()
