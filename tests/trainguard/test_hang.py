"""The progress watchdog in real processes: a read() on a never-answering FUSE mount is
found and reported with its stack, a long save or eval is not a hang (and the same eval
with a short eval budget is), and the watchdog's thread never keeps a process alive."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checks.hung_mount import fuse_available, hung_mount
from tests.trainguard.support import train_env

SUBJECT = Path(__file__).with_name("hang_subject.py")
# Small budgets: a 1 s floor, a short grace; steps of 10 ms.
FAST = ("hang_floor=1", "hang_ceiling=10", "hang_first_step=3", "hang_grace=0.2")


def run_subject(tmp_path: Path, *args: str, guard: tuple[str, ...] = (), timeout: float = 60.0
                ) -> subprocess.CompletedProcess[str]:
    settings = [f"checkpoint_dir={tmp_path / 'ckpt'}", f"heartbeat_dir={tmp_path / 'hb'}", *FAST, *guard]
    argv = [sys.executable, str(SUBJECT), *args, *(a for s in settings for a in ("--guard", s))]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=train_env())


@pytest.mark.skipif(fuse_available() is not None, reason=str(fuse_available()))
@pytest.mark.timeout(60)
def test_a_read_on_a_hung_mount_is_reported_with_the_read_in_the_stack_and_exits_140(tmp_path: Path) -> None:
    with hung_mount(tmp_path / "mnt") as mount:
        proc = run_subject(tmp_path, "--steps", "1000", "--hang-at", "40", "--hang-in",
                           f"read:{mount / 'shard-0001.bin'}")
    assert proc.returncode == 140, proc.stderr[-3000:]
    assert "HANG: no progress for" in proc.stderr and "after step 39" in proc.stderr
    beat = json.loads((tmp_path / "hb" / "rank-0.json").read_text())
    assert beat["phase"] == "hung" and beat["step"] == 39
    assert beat["frames"][0].startswith("read_shard (hang_subject.py:")
    report = Path(beat["report"]).read_text()
    assert "stuck in: read_shard (hang_subject.py:" in report
    assert 'in read_shard' in report          # faulthandler's all-threads dump
    assert "last completed step 39" in report
    assert "in uninterruptible sleep (D state" in report or "py-spy is not installed" in report


@pytest.mark.timeout(90)
def test_a_save_and_an_eval_longer_than_the_step_budget_are_not_hangs(tmp_path: Path) -> None:
    # Steps of 10 ms learn a 1 s budget (the floor); the save and the eval take 2 s.
    long = ("--steps", "100", "--save-every", "60", "--save-sleep", "2",
            "--eval-every", "80", "--eval-sleep", "2")
    proc = run_subject(tmp_path, *long, guard=("hang_saving=20", "hang_eval=20"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done 99" in proc.stdout and "HANG" not in proc.stderr
    assert not list((tmp_path / "hb").glob("hang-*.txt"))
    # The same eval with an eval budget shorter than it is a hang, in phase eval.
    short = run_subject(tmp_path / "short", *long, guard=("hang_saving=20", "hang_eval=1"))
    assert short.returncode == 140, short.stderr[-3000:]
    assert "in phase eval after step 78" in short.stderr


@pytest.mark.timeout(60)
def test_the_watchdog_thread_does_not_keep_a_finished_process_alive(tmp_path: Path) -> None:
    # With and without guard.finish(): the thread is a daemon and stops at `done`.
    for extra in ((), ("--no-finish",)):
        proc = run_subject(tmp_path, "--steps", "50", *extra, timeout=30)
        assert proc.returncode == 0 and "done 49" in proc.stdout, proc.stderr[-3000:]
        assert "HANG" not in proc.stderr
