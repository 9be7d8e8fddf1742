"""The `job` check reads the run's recovery record (trainguard's CLI in a child, ~70 ms of
CPU) only when the record's newest file changed, or when its reading is REREAD_S old (which
nodes the policy excludes changes with time alone); otherwise the reading it kept is used.
The record is the real one, written by the real CLI; the reads are counted by a spy around
the real read."""
from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from watchdogs.checks import recoveryrecord
from watchdogs.checks.context import TickContext
from watchdogs.checks.recoveryrecord import REREAD_S, Record, read_if_changed
from watchdogs.state.store import StateStore


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "trainguard.recovery", *args], check=True, capture_output=True,
                   timeout=60)


def test_the_record_is_read_again_only_when_it_changed_or_its_reading_is_old(
        tmp_path: Path, store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    cli("note", "--run-dir", str(run), "--job", "7", "--cause", "hang", "--nodes", "node2", "--step", "5")
    reads: list[Path] = []
    real = recoveryrecord.read

    def counted(run_dir: Path, timeout: float) -> Record:
        reads.append(run_dir)
        return real(run_dir, timeout)
    monkeypatch.setattr(recoveryrecord, "read", counted)
    start = datetime.now().astimezone()

    def look(after_s: float) -> Record:
        ctx = TickContext(start + timedelta(seconds=after_s), store, [], None, None)
        record = read_if_changed("train", 10.0, ctx, run)
        assert record is not None
        return record

    first = look(0)
    assert len(reads) == 1 and [e["kind"] for e in first.entries] == ["suspect"]
    assert look(30) == first and len(reads) == 1                 # unchanged: the kept reading
    cli("restart", "--run-dir", str(run), "--job", "7", "--kind", "inplace", "--cause", "hang",
        "--node", "node2", "--step", "0")
    changed = look(60)
    assert len(reads) == 2 and [e["kind"] for e in changed.entries] == ["suspect", "restart"]
    assert look(90) == changed and len(reads) == 2
    assert look(60 + REREAD_S + 1) == changed and len(reads) == 3   # old: read again
