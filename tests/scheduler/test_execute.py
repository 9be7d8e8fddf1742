"""Running one executable drop-in: Nagios output, timeouts that kill the whole process
group, and what a crash looks like."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.scheduler.conftest import PLUGIN, script
from watchdogs.dropins.execute import SHUTDOWN, DropInProcess
from watchdogs.result import Status


def run(tmp_path: Path, body: str, timeout: float = 10.0) -> tuple[DropInProcess, Path]:
    path = tmp_path / "dropin"
    path.write_text(script(body))
    path.chmod(0o700)
    log = tmp_path / "runs" / "x.log"
    return DropInProcess((str(path),), timeout, log, dict(os.environ), tmp_path), log


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_nagios_output_gives_status_summary_and_metrics(tmp_path: Path) -> None:
    proc, log = run(tmp_path, "echo 'GPU WARNING - 2 of 8 idle | idle=2;1;4;0;8'\necho detail line\nexit 1")
    result = proc.run()
    assert result is not None
    assert (result.status, result.summary, result.details) == (Status.WARNING, "GPU WARNING - 2 of 8 idle",
                                                               ("detail line",))
    assert result.metrics[0].label == "idle" and result.metrics[0].value == 2
    assert "exit 1 after" in log.read_text()


def test_exit_code_outside_nagios_range_is_unknown(tmp_path: Path) -> None:
    result = run(tmp_path, "echo oops\nexit 7")[0].run()
    assert result is not None and result.status is Status.UNKNOWN
    assert result.summary == "exit 7: oops"


def test_crash_without_stdout_is_summarised_from_stderr(tmp_path: Path) -> None:
    proc, log = run(tmp_path, "echo 'Traceback...' >&2\necho 'ValueError: bad input' >&2\nexit 1")
    result = proc.run()
    assert result is not None and result.summary == "ValueError: bad input"
    assert "--- stderr ---" in log.read_text()


def test_hung_dropin_and_its_children_are_killed_at_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    proc, _ = run(tmp_path, f"sleep 300 &\necho $! > {pidfile}\nwait", timeout=1.0)
    started = time.monotonic()
    result = proc.run()
    assert time.monotonic() - started < 5
    assert result is not None and result.status is Status.CRITICAL
    assert result.summary == "killed after 1 s (timeout): process group terminated"
    child = int(pidfile.read_text())
    wait_for(lambda: not alive(child), timeout=5, what="the drop-in's child to be gone")


def test_shutdown_kill_counts_as_not_run(tmp_path: Path) -> None:
    # The drop-in says it runs (a file only it writes), so the kill finds it running.
    started = tmp_path / "started"
    proc, _ = run(tmp_path, f"touch {started}\nsleep 300")
    box: list[object] = []
    worker = threading.Thread(target=lambda: box.append(proc.run()))
    worker.start()
    wait_for(started.exists, timeout=5, what="the drop-in to start")
    proc.kill(SHUTDOWN)
    worker.join(10)
    assert box == [None]


def test_script_without_interpreter_line_is_unknown_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "noshebang"
    path.write_text("echo hi\n")
    path.chmod(0o700)
    result = DropInProcess((str(path),), 5, tmp_path / "l.log", dict(os.environ), tmp_path).run()
    assert result is not None and result.status is Status.UNKNOWN
    assert "cannot run" in result.summary and "Exec format error" in result.summary


@pytest.mark.skipif(not Path(PLUGIN).exists(), reason="monitoring-plugins-basic is not installed")
def test_debian_check_disk_reports_its_own_status_and_summary(tmp_path: Path) -> None:
    argv = (PLUGIN, "-w", "1%", "-c", "1%", "-p", str(tmp_path))
    result = DropInProcess(argv, 10, tmp_path / "l.log", dict(os.environ), tmp_path).run()
    assert result is not None and result.status is Status.OK
    assert result.summary.startswith("DISK OK")
    assert result.metrics and result.metrics[0].unit == "B"
    critical = DropInProcess((PLUGIN, "-w", "100%", "-c", "100%", "-p", str(tmp_path)), 10,
                             tmp_path / "m.log", dict(os.environ), tmp_path).run()
    assert critical is not None and critical.status is Status.CRITICAL
    assert critical.summary.startswith("DISK CRITICAL")
