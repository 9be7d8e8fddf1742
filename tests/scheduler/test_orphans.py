"""A scheduler that crashes mid-run leaves an orphan: the run it started keeps going and
holds the item's lock. The restarted scheduler waits for it, names it, and ends it once it
has run past its timeout (plus a grace). Never two runs of one item at once."""
from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.helpers import wait_for
from tests.scheduler.conftest import Site, script
from watchdogs.scheduler.itemlock import lock_path


def alive(pid: int) -> bool:
    """A zombie is dead: only its parent (init, after the crash) has not reaped it yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def marks_of(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_an_orphan_past_its_timeout_is_ended_and_said_and_only_then_run_again(site: Site) -> None:
    marks = site.root / "marks"
    site.dropin("stuck", script(f"# watchdogs: timeout=2s\necho start $$ $PPID >> {marks}\nexec sleep 300"))
    first = site.popen("run")
    try:
        wait_for(lambda: marks_of(marks), timeout=30, what="the first run started")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    _, dropin, reaper = marks_of(marks)[0]
    note = json.loads(lock_path(site.state, "cron.hourly/stuck").read_text())
    assert note["child_pid"] == note["pgid"] == int(reaper), note  # the note names the orphan
    assert alive(int(dropin)), "the orphan should outlive its crashed scheduler"

    second = site.popen("run")
    try:
        wait_for(lambda: len(marks_of(marks)) >= 2, timeout=40, what="the item run again")
        # The second run started only once the orphan was gone.
        assert not alive(int(dropin)) and not alive(int(reaper))
        wait_for(lambda: "ended it" in site.log(), timeout=10, what="the ending said")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
    log = site.log()
    waiting = [line for line in log.splitlines() if "is still going: waiting for it" in line]
    assert waiting and "the run started by the previous instance at" in waiting[0], log
    assert f"(pid {reaper})" in waiting[0], waiting
    ended = [line for line in log.splitlines() if "ended it" in line]
    assert f"the orphaned run of cron.hourly/stuck (pid {reaper}" in ended[0], ended
    assert "ran past its timeout of 2 s" in ended[0] and "SIGTERM" in ended[0], ended
