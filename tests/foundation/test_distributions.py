"""The two distributions, as a user gets them: each wheel built from this checkout
(`python -m build`, then `twine check`) and installed into a fresh virtual environment.

- trainguard's wheel with the CPU torch beside it: slurm/train_tiny.py, a guarded loop, is
  interrupted by SIGUSR1, exits 140 with a checkpoint, and the second run ends with the
  weights of an uninterrupted run.

The README's install lines, each wheel alone in a fresh venv (trainguard bringing nothing of
the watchdog's; `watchdogs --version` and the scheduler's batch script from the wheel), are
run as written by test_install_routes.py.

Slow (a build, one venv, torch): about a minute with pip's cache warm.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainguard import __version__

ROOT = Path(__file__).resolve().parents[2]
WATCHDOG_ONLY = {"apscheduler", "jinja2", "requests", "slack-sdk", "slack_sdk"}
TORCH_PIN = "torch==2.13.0"  # the Makefile's TORCH_PIN: a wheel on disk here, not a download


def run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both distributions, sdist then wheel from the sdist (as `python -m build` does), with
    the backend of this environment (no download of hatchling per build)."""
    out = tmp_path_factory.mktemp("dist")
    for project in (ROOT, ROOT / "trainguard"):
        run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(project)])
    return out


def venv(where: Path) -> Path:
    run([sys.executable, "-m", "venv", str(where)])
    return where / "bin" / "python"


def installed(python: Path) -> set[str]:
    listing = run([str(python), "-m", "pip", "list", "--format=json"]).stdout
    return {entry["name"].lower() for entry in json.loads(listing)}


def test_python_build_gives_two_wheels_and_two_sdists_that_twine_accepts(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    v = __version__
    assert names == [f"slurm_watchdogs-{v}-py3-none-any.whl", f"slurm_watchdogs-{v}.tar.gz",
                     f"trainguard-{v}-py3-none-any.whl", f"trainguard-{v}.tar.gz"]
    run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir()))])


def test_a_guarded_loop_from_the_trainguard_wheel_saves_requeues_and_resumes_bit_identical(
        dist: Path, tmp_path: Path) -> None:
    python = venv(tmp_path / "train-env")
    run([str(python), "-m", "pip", "install", "-q", TORCH_PIN, str(next(dist.glob("trainguard-*.whl")))])
    # jinja2 comes with torch (a requirement of torch's), not with trainguard.
    assert installed(python) & WATCHDOG_ONLY <= {"jinja2"}
    shown = run([str(python), "-m", "pip", "show", "jinja2"]).stdout
    assert "Required-by: torch" in shown
    script = str(ROOT / "slurm" / "train_tiny.py")  # imports torch and trainguard, both from the venv
    args = ["--steps", "40", "--seed", "7"]
    whole = run([str(python), script, *args, "--guard", f"checkpoint_dir={tmp_path / 'ck-whole'}"],
                cwd=tmp_path).stdout.splitlines()[-1]
    steps = tmp_path / "steps.txt"
    guarded = [str(python), script, *args, "--step-sleep", "0.05", "--step-log", str(steps),
               "--guard", f"checkpoint_dir={tmp_path / 'ck'}"]
    first = subprocess.Popen(guarded, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (steps.exists() and len(steps.read_text().splitlines()) >= 5):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    first.send_signal(signal.SIGUSR1)  # what `scancel --signal=USR1` delivers
    out, err = first.communicate(timeout=120)
    assert first.returncode == 140, f"expected exit 140 (saved, requeue):\n{out}\n{err}"
    second = run(guarded, cwd=tmp_path).stdout.splitlines()[-1]
    assert whole.startswith("digest ") and second == whole


def test_the_trainguard_distribution_carries_the_repositorys_licence() -> None:
    assert (ROOT / "trainguard" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
