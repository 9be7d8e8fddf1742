"""Once the guard decided to exit, a repeated signal never kills the process: a real training
process, real USR1/TERM sent while its `finally` block and then its atexit handler run."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import wait_for
from tests.trainguard.support import train_env

# The training: saves and exits 140 on USR1; its `finally` block and an atexit handler each
# say "waiting-<name>" and wait for the test's "go-<name>" (the test signals in between).
TRAINING = """
import atexit, sys, time
from pathlib import Path
from trainguard import Guard, config_from
from trainguard.slurm.job import JobEnv

root = Path(sys.argv[1])

def hold(name):
    (root / f"waiting-{name}").touch()
    while not (root / f"go-{name}").exists():
        time.sleep(0.005)

guard = Guard(config_from({}, checkpoint_dir=root / "ckpt", forced_exit=0),
              save=lambda d: (d / "w").write_text("w"), load=lambda d: None, job=JobEnv()).start()
atexit.register(hold, "atexit")     # after start(): runs before the guard's fast exit
try:
    with guard:
        for step in range(guard.resume(), 10**9):
            if step == 3:
                (root / "training").touch()
            guard.step(step)
            time.sleep(0.001)
finally:
    hold("finally")
"""


def _stage(root: Path, proc: subprocess.Popen[str], name: str) -> None:
    wait_for(lambda: (root / name).exists() or proc.poll() is not None, 60, 0.01, name)
    assert proc.poll() is None, f"died before {name}: {proc.returncode}"


@contextmanager
def training(root: Path, source: str) -> Iterator[subprocess.Popen[str]]:
    """The training running in its own process; killed if the test leaves it running."""
    script = root / "train.py"
    script.write_text(textwrap.dedent(source))
    proc = subprocess.Popen([sys.executable, str(script), str(root)], env=train_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_signals_during_finally_and_atexit_after_the_guard_decided_to_exit_keep_code_140(
        tmp_path: Path) -> None:
    with training(tmp_path, TRAINING) as proc:
        _stage(tmp_path, proc, "training")
        proc.send_signal(signal.SIGUSR1)                   # the one that counts: save, exit 140
        for stage in ("finally", "atexit"):
            _stage(tmp_path, proc, f"waiting-{stage}")
            proc.send_signal(signal.SIGUSR1)               # the batch script's trap forwards again
            proc.send_signal(signal.SIGTERM)               # and Slurm's TERM arrives
            (tmp_path / f"go-{stage}").touch()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 140, out[-3000:]
    assert [p.name for p in (tmp_path / "ckpt").glob("step-*")] != [], out[-3000:]


# The training: its save waits for the test's "go-save", so a signal lands after the decision.
SLOW_SAVE = TRAINING.replace('save=lambda d: (d / "w").write_text("w")',
                             'save=lambda d: (hold("save"), (d / "w").write_text("w"))')


def test_a_signal_after_the_stop_was_decided_is_still_named_in_the_log(tmp_path: Path) -> None:
    with training(tmp_path, SLOW_SAVE) as proc:
        _stage(tmp_path, proc, "training")
        proc.send_signal(signal.SIGUSR1)                   # the warning: stop and save
        _stage(tmp_path, proc, "waiting-save")
        proc.send_signal(signal.SIGTERM)                   # Slurm's TERM, after the decision
        for stage in ("save", "finally", "atexit"):
            (tmp_path / f"go-{stage}").touch()
        out, _ = proc.communicate(timeout=60)
    assert "trainguard: received SIGUSR1 -> " in out, out[-3000:]
    assert "trainguard: received SIGTERM after the stop was decided" in out, out[-3000:]
    assert out.index("stopping after step") < out.index("SIGTERM after the stop"), out[-3000:]
