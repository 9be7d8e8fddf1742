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
from sys import _current_frames  # CPython's documented way to read another thread's stack; no public one
from typing import TextIO

# py-spy attaches with ptrace, which waits forever for a thread in uninterruptible sleep
# (a read on a hung mount): it is not started then, and bounded in any case. Loading the
# symbols of a large native library (libtorch) takes seconds on a busy node.
PYSPY_TIMEOUT_S = 20.0
TOP_FRAMES = 3


def main_thread_frames(native_top: str | None = None, limit: int = TOP_FRAMES) -> tuple[str, ...]:
    """Where the main thread is, innermost first: where it waits (`native_top`, from py-spy,
    else the innermost Python frame when that is library code), then the training's own
    frames: ("c10d::Reducer::finalize_backward (libtorch_cpu.so)", "train_step (train.py:108)")."""
    frame = _current_frames().get(threading.main_thread().ident or -1)
    if frame is None:
        return (native_top,) if native_top else ()
    summary = list(reversed(traceback.extract_stack(frame)))
    own = [f"{f.name} ({Path(f.filename).name}:{f.lineno})" for f in summary if not is_library(f.filename)]
    innermost = summary[0]
    head = ([native_top] if native_top else
            [f"{innermost.name} ({Path(innermost.filename).name}:{innermost.lineno})"]
            if is_library(innermost.filename) else [])
    return tuple([*head, *own][:limit])


def is_library(filename: str) -> bool:
    # Installed packages, the standard library and trainguard itself (also when installed
    # from a checkout, where it is not under site-packages): not where the training's author
    # looks. A rank blocked in the guard's agreement must still name the training's line.
    stdlib = sysconfig.get_paths()["stdlib"]
    # The trainguard package as a whole (this file is in trainguard/hangs/: its own folder
    # alone left guard.py and stopping/agreement.py counted as the training's frames).
    own_package = str(Path(__file__).resolve().parent.parent) + os.sep
    return "-packages" + os.sep in filename or filename.startswith((stdlib, "<", own_package))


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


class NativeDump:
    """`py-spy dump --native` of this process, started at once and collected later, so
    that it runs while the Python stacks are written and the grace passes."""

    def __init__(self) -> None:
        self.text, self.status = "", ""
        self._proc: subprocess.Popen[str] | None = None
        command = pyspy_command()
        if command is None:
            self.status = "py-spy is not installed: no native stacks; pip install 'slurm-watchdogs[hang]'"
            return
        stuck = threads_in_uninterruptible_sleep()
        if stuck:
            self.status = (f"no native stacks: thread(s) {', '.join(stuck)} in uninterruptible sleep (D "
                           "state, e.g. I/O on a hung mount), which py-spy cannot attach to; see the "
                           "Python stacks above")
            return
        allow_tracing_by_children()
        try:
            # backslashreplace: a source path that is not UTF-8 is shown as \xNN, never a crash
            self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          errors="backslashreplace")
        except OSError as exc:
            self.status = f"py-spy failed: {exc}"

    def collect(self, timeout: float = PYSPY_TIMEOUT_S) -> None:
        if self._proc is None:
            return
        try:
            out, err = self._proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.communicate()
            self.status = (f"py-spy could not attach within {timeout:g} s: a thread is probably in "
                           "uninterruptible sleep, e.g. I/O on a hung mount; see the Python stacks above")
            return
        self.text = out + (err if self._proc.returncode else "")
        self.status = "ok" if self._proc.returncode == 0 else f"py-spy exit {self._proc.returncode}"

    def write(self, out: TextIO) -> None:
        if self.status == "ok":
            out.write(f"\n--- py-spy dump --native --pid {os.getpid()} ---\n{self.text}")
        else:
            out.write(f"\n({self.status})\n{self.text}")

    @property
    def main_thread_top(self) -> str | None:
        """The innermost named C/C++ frame of the main thread, where it waits:
        "c10d::Reducer::finalize_backward (libtorch_cpu.so)"."""
        block = self.text.split('"MainThread"', 1)
        if len(block) < 2:
            return None
        for line in block[1].splitlines()[1:]:
            frame = line.strip()
            if not frame or frame.startswith("Thread "):
                return None
            if "::" in frame and not frame.startswith("std::"):
                return frame
        return None


def threads_in_uninterruptible_sleep() -> list[str]:
    """This process's threads in state D (Linux /proc; procfs never blocks on a hung mount)."""
    stuck = []
    for stat in Path("/proc/self/task").glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "D":
            stuck.append(stat.parent.name)
    return sorted(stuck)


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


def write_report(path: Path, header: str) -> None:
    """The hang report: `header`, then every thread's Python stack."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", errors="backslashreplace") as out:   # a frame's path may not be UTF-8
        out.write(header.rstrip("\n") + "\n\n--- Python stacks (faulthandler, most recent call first) ---\n")
        write_python_stacks(out)


def append_native(path: Path, native: NativeDump) -> None:
    with path.open("a", errors="backslashreplace") as out:
        native.write(out)
