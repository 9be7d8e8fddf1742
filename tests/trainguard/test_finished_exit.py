"""A finished distributed training leaves through `guard.exit()`: under gloo the interpreter's
finalisation can abort a rank that finished (PyTorch's worker threads still dropping the last
collective's tensors need Python, which is going away: "terminate called without an active
exception", SIGABRT), and the launcher then reports a failed training. Seen in CI, and in 4 of
90 runs of a 4-rank torchrun of slurm/train_tiny.py on this machine."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.trainguard.support import VENV_BIN, train_env

FINISHED_SCRIPT = r"""
import atexit, os, sys
def say(line):
    os.write(1, (line + "\n").encode())   # one write: the two ranks share one stdout
from trainguard import Guard, config_from
guard = Guard(config_from({}, exit_file=sys.argv[1])).start()
import torch, torch.distributed as dist
rank = int(os.environ["RANK"])
atexit.register(lambda: say(f"rank{rank} atexit: distributed still initialised="
                            f"{dist.is_available() and dist.is_initialized()}"))
class Finalised:
    def __del__(self):
        say(f"rank{rank} finalised")
keep = Finalised()
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
with guard:
    for step in range(guard.resume(), 20):
        model(torch.randn(2, 4)).sum().backward()
        guard.step(step)
say(f"rank{rank} finished")
guard.exit(int(sys.argv[2]))
"""


def run_finished(tmp_path: Path, code: int) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "finished.py"
    script.write_text(FINISHED_SCRIPT)
    return subprocess.run([f"{VENV_BIN}/torchrun", "--standalone", "--nproc-per-node=2", str(script),
                           str(tmp_path / "exit-code"), str(code)],
                          capture_output=True, text=True, timeout=120, env=train_env())


@pytest.mark.timeout(150)
def test_a_finished_distributed_training_exits_0_skipping_the_finalisation_that_can_abort_it(
        tmp_path: Path) -> None:
    done = run_finished(tmp_path, 0)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for rank in (0, 1):
        assert f"rank{rank} finished" in lines
        # The atexit handlers registered after guard.start() ran, with torch.distributed
        # already left; the finalisation (module globals' __del__), where gloo's threads
        # can abort the process, did not run.
        assert f"rank{rank} atexit: distributed still initialised=False" in lines, done.stdout
        assert f"rank{rank} finalised" not in lines
    # A finished training writes no exit file: the launcher's code stands for every rank.
    assert not (tmp_path / "exit-code").exists()


@pytest.mark.timeout(150)
def test_a_finished_training_exits_with_the_code_it_asks_for(tmp_path: Path) -> None:
    done = run_finished(tmp_path, 3)
    assert done.returncode != 0
    assert "exitcode  : 3" in done.stderr, done.stderr[-3000:]
