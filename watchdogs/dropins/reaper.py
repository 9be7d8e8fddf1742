"""Run a drop-in and kill whatever it leaves behind, even processes that left its session.

    python -I -S reaper.py REPORT_FILE ARGV...

This process makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every
process the drop-in starts stays below it however it detaches (`&`, `setsid`, a double
fork): when its parent dies it is re-parented here, not to init. Once the drop-in exits
(or on SIGTERM, the timeout), every process still below this one gets SIGTERM, then
SIGKILL after a grace period, and is reaped; their pids and command lines go to
REPORT_FILE for the run's result. Exits as the drop-in did (same code or same signal).

Stdlib only and run with `python -I -S`: it starts in about 0.1 s on a busy node and
imports nothing of ours (the scheduler's own process is never made a subreaper, so its
other children are never reaped by mistake).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 2.0
GIVE_UP_S = 5.0


def _subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.stderr.write(f"watchdogs: cannot become a subreaper (errno {ctypes.get_errno()})\n")


def _below(me: int) -> list[int]:
    """Every live process descending from `me` (from /proc's parent links)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields and fields[0] != b"Z":
            parents[int(entry)] = int(fields[1])
    found, frontier = [], [me]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="backslashreplace").strip()[:200]
    except OSError:
        return "?"


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _clean_up(report: str) -> None:
    me = os.getpid()
    left = _below(me)
    if not left:
        return
    with open(report, "a") as fh:
        fh.writelines(f"{pid} {_cmdline(pid)}\n" for pid in left)
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, GIVE_UP_S)):
        for pid in _below(me):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap()
            if not _below(me):
                return
            time.sleep(0.05)


def main(argv: list[str]) -> int:
    report, command = argv[0], argv[1:]
    _subreaper()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # re-raising a crash signal: no core of ours
    terminated = []
    signal.signal(signal.SIGTERM, lambda *_: terminated.append(True))  # a flag; handled below
    try:
        child = os.fork()
    except OSError as exc:
        sys.stderr.write(f"cannot run {command[0]}: {exc.strerror}\n")
        return 126
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execv(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"cannot run {command[0]}: {exc.strerror}\n")
        os._exit(127)
    status = 0
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    _clean_up(report)
    _reap()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        # Die of the same signal, so the scheduler reads "killed by signal N" from us too.
        # SIGKILL and SIGSTOP cannot be caught, so their disposition cannot be set (EINVAL).
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGKILL if sig == signal.SIGSTOP else sig)
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
