"""Run a filesystem probe in a child process with a deadline.

A stat() on a dead mount blocks in the kernel until the server returns. In a thread of
ours that thread would be stuck for good (and would keep the process from exiting); a
child process is killed and reaped in the background, and the check says "filesystem not
responding" instead of hanging the scheduler.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from watchdogs.errors import WatchdogsError
from watchdogs.humanize import duration, exit_status, killed_by

WORKER = "watchdogs.fsprobe.worker"
# The child's first line. `-S`: no `site`, so no site-packages scan and no editable-install
# hook (the child needs the standard library and this package only: ~10 ms of interpreter
# start instead of ~30, for a process started at every probe). The folder holding this
# package goes last on sys.path, and the current directory (which `-c` and `-m` put first)
# goes away (unless PYTHONSAFEPATH already kept it out): a `watchdogs` folder wherever the
# scheduler runs cannot replace the probe.
BOOT = ("import sys; sys.flags.safe_path or sys.path.pop(0); sys.path.append(sys.argv[1]); "
        "from watchdogs.fsprobe.worker import main; main(sys.argv[2:])")


class FsError(WatchdogsError):
    """A probe failed: missing path, permission, a quota tool's error."""


class FsNotResponding(FsError):
    """The probe did not answer in time: a hung or dead mount."""


def probe(op: str, args: Mapping[str, Any], timeout: float, what: str) -> Any:
    """Run `op` of watchdogs.fsprobe.worker on `args` in a child; its JSON answer."""
    import json  # here: the check classes import this module, `status` runs no probe

    out = run_bounded(probe_argv(op, args), timeout, what)
    try:
        reply = json.loads(out)
    except ValueError:
        raise FsError(f"{what}: probe gave no answer") from None
    if "error" in reply:
        raise FsError(f"{what}: {reply['error']}")
    return reply["result"]


def probe_argv(op: str, args: Mapping[str, Any]) -> list[str]:
    """The child's command line (an argument list: paths travel as data, never as code)."""
    import json

    home = _package_home()
    request = json.dumps(dict(args))
    if home is None:  # not a plain folder (a zip?): the slower start that always works
        return [sys.executable, "-m", WORKER, op, request]
    return [sys.executable, "-S", "-c", BOOT, home, op, request]


def _package_home() -> str | None:
    """The folder that holds the `watchdogs` package (and trainguard beside it), when the
    worker is a plain file there."""
    import watchdogs

    package = os.path.dirname(os.path.abspath(watchdogs.__file__ or ""))
    worker = os.path.join(package, "fsprobe", "worker.py")
    return os.path.dirname(package) if os.path.isfile(worker) else None


def run_bounded(argv: Sequence[str], timeout: float, what: str,
                env: Mapping[str, str] | None = None) -> str:
    """stdout of argv (an argument list, never a shell string), or FsNotResponding."""
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, errors="backslashreplace", env=env,
                                start_new_session=True)
    except FileNotFoundError:
        raise FsError(f"{what}: {argv[0]}: command not found") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        abandon(proc)
        raise FsNotResponding(f"{what}: filesystem not responding (no answer within "
                              f"{duration(timeout)})") from None
    if proc.returncode != 0 and not out.strip():
        code = proc.returncode
        last = (err.strip().splitlines() or [killed_by(-code) if code < 0 else exit_status(code)])[-1]
        raise FsError(f"{what}: {last}")
    return out


def abandon(proc: subprocess.Popen[str]) -> None:
    """Kill a stuck probe and reap it whenever the kernel lets it go, without waiting:
    a process blocked on a dead mount may only die when the mount comes back."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: whatever it started goes too
    threading.Thread(target=_reap, args=(proc,), name=f"reap-probe-{proc.pid}", daemon=True).start()


def _reap(proc: subprocess.Popen[str]) -> None:
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
