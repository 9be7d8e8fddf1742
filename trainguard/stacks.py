"""Where a process is stuck: every thread's Python stack (faulthandler), native stacks
(`py-spy dump --native`, where py-spy is installed) and a short "top frames" summary for
the heartbeat and the alert.

All of it works while the main thread is blocked inside a C call (a gloo all_reduce, a
read() on a hung mount): faulthandler and `sys._current_frames()` read the frames without
the main thread's help, and py-spy reads the process from outside.
"""
from __future__ import annotations

import faulthandler
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import traceback
from pathlib import Path
from typing import TextIO

# py-spy attaches with ptrace, which waits for a thread in uninterruptible sleep (a read
# on a hung mount) forever: the Python stacks above are then all there is.
PYSPY_TIMEOUT_S = 5.0
TOP_FRAMES = 3


def main_thread_frames(limit: int = TOP_FRAMES) -> tuple[str, ...]:
    """The main thread's innermost frame, then the training's own innermost frames
    (library frames skipped), innermost first:
    ("_engine_run_backward (graph.py:979)", "train_step (train.py:108)", "main (train.py:167)")."""
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    if frame is None:
        return ()
    summary = list(reversed(traceback.extract_stack(frame)))
    own = [f for f in summary[1:] if not _is_library(f.filename)]
    return tuple(f"{f.name} ({Path(f.filename).name}:{f.lineno})" for f in [summary[0], *own][:limit])


def _is_library(filename: str) -> bool:
    # Installed packages and the standard library: not where the training's author looks.
    stdlib = sysconfig.get_paths()["stdlib"]
    return "-packages" + os.sep in filename or filename.startswith((stdlib, "<"))


def write_python_stacks(out: TextIO) -> None:
    """Every thread's Python stack, most recent call first (faulthandler's format)."""
    out.flush()
    faulthandler.dump_traceback(file=out, all_threads=True)


def pyspy_command() -> list[str] | None:
    exe = shutil.which("py-spy") or _beside_python("py-spy")
    return [exe, "dump", "--native", "--pid", str(os.getpid())] if exe else None


def _beside_python(name: str) -> str | None:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else None


def write_native_stacks(out: TextIO, timeout: float = PYSPY_TIMEOUT_S) -> str:
    """`py-spy dump --native` of this process appended to `out`; returns a one-line status."""
    command = pyspy_command()
    if command is None:
        out.write("\n(py-spy is not installed: no native stacks; pip install 'slurm-watchdogs[hang]')\n")
        return "py-spy not installed"
    allow_tracing_by_children()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        out.write(f"\n(py-spy could not attach within {timeout:g} s: a thread is probably in "
                  "uninterruptible sleep, e.g. I/O on a hung mount; see the Python stacks above)\n")
        return "py-spy timed out"
    except OSError as exc:
        out.write(f"\n(py-spy failed: {exc})\n")
        return f"py-spy failed: {exc}"
    out.write(f"\n--- py-spy dump --native --pid {os.getpid()} (exit {proc.returncode}) ---\n")
    out.write(proc.stdout)
    if proc.returncode != 0:
        out.write(proc.stderr)
        return f"py-spy exit {proc.returncode}"
    return "py-spy ok"


def allow_tracing_by_children() -> None:
    # Yama's ptrace_scope=1 lets a process be traced only by its ancestors; py-spy is our
    # child. PR_SET_PTRACER(ANY) lifts that for this process alone (no effect elsewhere).
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_ptracer, ptracer_any = 0x59616D61, ctypes.c_ulong(-1)
        libc.prctl(pr_set_ptracer, ptracer_any, 0, 0, 0)
    except (OSError, AttributeError):
        return


def write_report(path: Path, header: str, native: bool) -> str:
    """The hang report: `header`, every thread's Python stack, then the native stacks.
    Returns the py-spy status ("" when native stacks were not asked for)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.write(header.rstrip("\n") + "\n\n--- Python stacks (faulthandler, most recent call first) ---\n")
        write_python_stacks(out)
        return write_native_stacks(out) if native else ""
