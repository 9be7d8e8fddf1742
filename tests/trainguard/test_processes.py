"""The example training as a real process, without Slurm: forced exit of a hung loop,
fallback from a corrupt checkpoint, and the end of a queued array after a kill switch."""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.trainguard.support import PYTHON, TRAIN_TINY, digest_of, read_steps, run_tiny, train_env
from trainguard.checkpoints.checkpoint import step_name


def start_tiny(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([PYTHON, str(TRAIN_TINY), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=train_env())


@pytest.mark.timeout(60)
def test_a_hung_loop_is_ended_by_the_forced_exit_timer(tmp_path: Path) -> None:
    steps = tmp_path / "steps"
    proc = start_tiny("--steps", "100", "--step-log", str(steps), "--hang-step", "5",
                      "--guard", f"checkpoint_dir={tmp_path / 'ckpt'}", "--guard", "forced_exit=2")
    try:
        wait_for(lambda: steps.exists() and read_steps(steps)[-1:] == [4], 30, 0.1, "step 4")
        time.sleep(0.3)                                   # now inside the "hung collective"
        sent = time.monotonic()
        proc.send_signal(signal.SIGUSR1)
        _, err = proc.communicate(timeout=20)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == 140                       # the time-limit code: the script requeues
    assert 1.5 < took < 8.0, took                      # timer 2 s, polled every 0.1 s; a loaded host
    assert "forced exit with code 140" in err and "in <module>" in err   # the stack dump
    assert not (tmp_path / "ckpt" / step_name(4)).exists()


@pytest.mark.timeout(120)
def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_and_ends_identical(
        tmp_path: Path, reference_digest) -> None:
    args = ("--steps", "300", "--save-every", "20", "--guard", f"checkpoint_dir={tmp_path / 'ckpt'}")
    steps = tmp_path / "steps"
    proc = start_tiny(*args, "--step-sleep", "0.02", "--step-log", str(steps))
    try:
        wait_for(lambda: steps.exists() and len(read_steps(steps)) >= 50, 30, 0.05, "step 50")
        proc.send_signal(signal.SIGUSR1)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 140
    ckpts = sorted((tmp_path / "ckpt").glob("step-*"))
    assert len(ckpts) == 2                              # the periodic one and the stop's
    newest, previous = ckpts[-1], ckpts[0]
    state = newest / "state.pt"
    state.write_bytes(b"\0" * state.stat().st_size)     # same size: only loading can tell
    done = run_tiny(*args, "--step-log", str(steps))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"loading {newest} failed" in done.stderr and f"({previous})" in done.stderr
    assert "not the newest checkpoint" in done.stderr and "step(s) lost" in done.stderr
    assert digest_of(done.stdout) == reference_digest("--steps", "300")


FAST_EXIT_SCRIPT = """
import atexit, os, sys
atexit.register(lambda: print("atexit before the guard", flush=True))
from trainguard import Guard, config_from
from trainguard.slurm.job import JobEnv
guard = Guard(config_from({{}}, checkpoint_dir={ckpt!r}, fast_exit={fast}), job=JobEnv(),
              save=lambda d: (d / "w").write_text("w")).start()
atexit.register(lambda: print("atexit after the guard", flush=True))
class Finalised:
    def __del__(self):
        print("finalised", flush=True)
keep = Finalised()
try:
    with guard:
        guard.resume()
        os.kill(os.getpid(), 10)
        guard.step(0)
finally:
    print("finally ran", flush=True)
"""


@pytest.mark.parametrize("fast", [True, False])
def test_a_guard_exit_runs_finally_and_the_later_atexit_handlers_and_keeps_its_code(
        tmp_path: Path, fast: bool) -> None:
    script = FAST_EXIT_SCRIPT.format(ckpt=str(tmp_path / "ckpt"), fast=fast)
    proc = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=30,
                          env=train_env())
    assert proc.returncode == 140, proc.stderr
    assert "stopping after step 0: user_signal -> exit 140" in proc.stderr   # logging flushed
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["finally ran", "atexit after the guard"]
    # The fast exit skips the finalisation (module globals' __del__) and the atexit
    # handlers registered before guard.start(), as documented.
    assert ("atexit before the guard" in lines) is (not fast)
    if fast:
        # Skipped for sure by the fast exit. Without it CPython usually runs module globals'
        # __del__ at shutdown, but promises neither that nor a usable stdout by then.
        assert "finalised" not in lines
