"""trainguard's own files in a run folder a team shares (issue 35 §C): a symlink planted at any
name trainguard writes (the old predictable temporary names, the final names) is never written
through, every file gets its mode whatever the umask, and the temporary file a SIGKILLed rank
left is removed by the next writer. Real files, real processes, the user's own umask."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.trainguard.support import train_env
from trainguard import _files
from trainguard.heartbeat import HeartbeatWriter

VICTIM = b"the victim's own file\n"
# Each writer of the run folder, run as a rank or the batch script runs it (a process of its own).
WRITERS = """
import os, sys
from pathlib import Path
from trainguard.heartbeat import write_heartbeat
from trainguard.stopping.exits import write_exit_file
from trainguard.hangs.record import HangCount, write_count
from trainguard.stopping.progress import Progress, write_progress
from trainguard.checkpoints.marker import write_atomically
run = Path(sys.argv[1])
write_heartbeat(run / "beats", 0, 12, "train", frames=("/data/caf\\udce9/train.py:4 (all_reduce)",))
write_exit_file(run / "exit-code", 140, "hung at step 12")
write_count(run, HangCount("7", 5, (0,)))
write_progress(run, Progress("7", 5, 1))
write_atomically(run / "latest", "step-00000005\\n")
"""


def planted(run: Path, victim: Path, pids: range) -> list[Path]:
    """Symlinks to `victim` at every name an earlier trainguard wrote through, for `pids`."""
    names = [f"beats/.rank-0.json.{p}.tmp" for p in pids] + \
        [f".exit-code.{p}.tmp" for p in pids] + [f".{n}.{p}.tmp" for n in (".trainguard-hangs.json",)
                                                 for p in pids] + \
        [f".trainguard-progress.json.{p}.tmp" for p in pids] + \
        [f"recovery/.summary.txt.{p}.tmp" for p in pids] + [".latest.tmp"]
    links = []
    for name in names:
        link = run / name
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(victim)
        links.append(link)
    return links


@pytest.mark.parametrize("umask", [0o002, 0o077])
def test_links_planted_in_a_shared_run_folder_are_never_written_through(tmp_path: Path, umask: int) -> None:
    run, victim = tmp_path / "run", tmp_path / "victim.txt"
    run.mkdir(mode=0o2775)
    victim.write_bytes(VICTIM)
    victim.chmod(0o600)
    # The pid the writer gets is near the next one the kernel gives: plant a generous range.
    base = os.getpid()
    links = planted(run, victim, range(base, base + 400))
    env = train_env(SLURM_JOB_ID="7", SLURM_STEP_ID="0")
    done = subprocess.run([sys.executable, "-c", WRITERS, str(run)], capture_output=True, text=True,
                          env=env, timeout=60, check=False, preexec_fn=lambda: os.umask(umask))
    assert done.returncode == 0, done.stderr
    note = subprocess.run([sys.executable, "-m", "trainguard.recovery", "restart", "--run-dir", str(run),
                           "--job", "7", "--kind", "inplace", "--cause", "hang", "--node", "node2"],
                          capture_output=True, text=True, env=env, timeout=60, check=False,
                          preexec_fn=lambda: os.umask(umask))
    assert note.returncode == 0, note.stderr
    assert victim.read_bytes() == VICTIM and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert all(link.is_symlink() for link in links)
    for name in ("beats/rank-0.json", "exit-code", ".trainguard-hangs.json", ".trainguard-progress.json",
                 "latest", "recovery/summary.txt"):
        st = (run / name).lstat()
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644, (name, oct(st.st_mode))
    assert json.loads((run / "beats/rank-0.json").read_text())["frames"] == \
        ["/data/caf\\xe9/train.py:4 (all_reduce)"]
    assert (run / "exit-code").read_text() == "140\nhung at step 12\nstep=7.0\n"
    # The final name itself planted as a link: replaced by the file, the link's target untouched.
    (run / "exit-code").unlink()
    (run / "exit-code").symlink_to(victim)
    subprocess.run([sys.executable, "-c", WRITERS, str(run)], env=env, timeout=60, check=True)
    assert victim.read_bytes() == VICTIM and not (run / "exit-code").is_symlink()


def test_an_appended_record_planted_as_a_link_is_refused_not_followed(tmp_path: Path) -> None:
    run, victim = tmp_path / "run", tmp_path / "victim.txt"
    (run / "recovery").mkdir(parents=True)
    victim.write_bytes(VICTIM)
    (run / "recovery" / "node2.jsonl").symlink_to(victim)
    (run / "hangs.jsonl").symlink_to(victim)
    note = subprocess.run([sys.executable, "-m", "trainguard.recovery", "note", "--run-dir", str(run),
                           "--job", "7", "--cause", "hang", "--nodes", "node2"], capture_output=True,
                          text=True, env=train_env(SLURMD_NODENAME="node2"), timeout=60, check=False)
    assert note.returncode == 1 and "cannot record" in note.stderr and "Traceback" not in note.stderr
    with pytest.raises(OSError):
        _files.append_line(run / "hangs.jsonl", b"{}\n")
    assert victim.read_bytes() == VICTIM


def test_a_killed_ranks_temporary_file_is_removed_by_the_next_writer_and_a_fresh_one_kept(
        tmp_path: Path) -> None:
    beats = tmp_path / "beats"
    beats.mkdir()
    stale, fresh, other = beats / ".rank-0.json.k1ll3d.tmp", beats / ".rank-0.json.wr1t1n.tmp", \
        beats / ".rank-1.json.0ld.tmp"
    for path in (stale, fresh, other):
        path.write_text("{")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    os.utime(other, (hour_ago, hour_ago))
    link = beats / ".rank-0.json.l1nk.tmp"
    link.symlink_to(tmp_path / "elsewhere")
    os.utime(link, (hour_ago, hour_ago), follow_symlinks=False)
    writer = HeartbeatWriter(beats, 0, 60.0, "7")
    writer.beat(1, 0.0)
    assert not stale.exists() and fresh.exists(), sorted(p.name for p in beats.iterdir())
    assert other.exists() and link.is_symlink()     # another rank's; not a file this writer made
    assert json.loads((beats / "rank-0.json").read_text())["step"] == 1
    assert sorted(p.name for p in beats.iterdir()) == sorted(
        [".rank-0.json.wr1t1n.tmp", ".rank-0.json.l1nk.tmp", ".rank-1.json.0ld.tmp", "rank-0.json"])
