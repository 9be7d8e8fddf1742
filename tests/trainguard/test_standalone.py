"""trainguard stands alone: it is what people install into their training environments, so
it imports nothing from the watchdogs service (`watchdogs`, `notifiers`) and needs no extra
(torch is imported lazily, only by a training that already uses it)."""
from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import trainguard

PACKAGE = Path(trainguard.__file__).resolve().parent
SERVICE = ("watchdogs", "notifiers")


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_trainguard_source_file_imports_the_service() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 10, files               # the walk found the package
    offenders = {str(f.relative_to(PACKAGE)): sorted(_imported_roots(f) & set(SERVICE)) for f in files}
    assert not {f: roots for f, roots in offenders.items() if roots}


# Runs in a fresh interpreter that cannot import the service's packages nor torch: a finder
# at the front of sys.meta_path refuses them, as a training environment without them would.
_BLOCKED_RUN = """
import importlib, importlib.abc, os, pkgutil, signal, sys, tempfile
from pathlib import Path
BLOCKED = ("watchdogs", "notifiers", "torch")

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed here")
        return None

sys.meta_path.insert(0, Refuse())
import pytest

import trainguard
for info in pkgutil.walk_packages(trainguard.__path__, "trainguard."):
    if ".integrations" not in info.name:        # those need their framework, by design
        importlib.import_module(info.name)
from trainguard import Guard, config_from
from trainguard.slurm.job import JobEnv
root = Path(tempfile.mkdtemp())
guard = Guard(config_from({}, checkpoint_dir=root / "ckpt", forced_exit=0, fast_exit=False),
              save=lambda d: (d / "w").write_text("w"), load=lambda d: None, job=JobEnv())
with guard:
    for step in range(guard.resume(), 10):
        if step == 5:
            os.kill(os.getpid(), signal.SIGUSR1)
        try:
            guard.step(step)
        except SystemExit as stop:
            loaded = sorted(m.split(".")[0] for m in sys.modules if m.split(".")[0] in BLOCKED)
            print("exit", stop.code, "saved", sorted(p.name for p in (root / "ckpt").iterdir()),
                  "loaded", loaded)
            raise
"""


def test_trainguard_saves_and_exits_140_with_neither_the_service_nor_torch_importable(
        tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_BLOCKED_RUN)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 140, proc.stderr[-3000:]
    assert "exit 140 saved ['latest', 'step-00000005'] loaded []" in proc.stdout, proc.stdout


def test_importing_trainguard_loads_no_service_module() -> None:
    code = ("import sys, trainguard, trainguard.guard, trainguard.slurm.job, trainguard.config; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'watchdogs', 'notifiers'}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_its_own_slurm_runner_is_bounded_in_time_and_says_what_failed() -> None:
    from trainguard.errors import SlurmBusy, SlurmError
    from trainguard.slurm.run import run_slurm

    with pytest.raises(SlurmBusy, match=r"sleep did not answer within 0.2s"):
        run_slurm(["sleep", "30"], timeout=0.2)
    with pytest.raises(SlurmError, match=r"no-such-scontrol: command not found"):
        run_slurm(["no-such-scontrol", "show", "job"])
    with pytest.raises(SlurmError, match=r"sh failed \(exit 3\): Invalid job id specified"):
        run_slurm(["sh", "-c", "echo 'Invalid job id specified' >&2; exit 3"])
    assert run_slurm(["echo", "JobState=RUNNING"]).stdout == "JobState=RUNNING\n"
