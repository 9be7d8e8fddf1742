"""Special files are named for what they are (issue 37, item 5): a FIFO, a socket, a folder
or a device where a file is read answers at once with its kind in words, never blocks,
and is never "filesystem not responding" (a FIFO's open() would wait for a writer forever).

Real FIFOs, sockets and /dev/null; the log_stale check through the real loader and the
bounded probe child."""
from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.checks.conftest import tick, write_config
from tests.helpers import unix_socket_at
from watchdogs.checks import jobfiles
from watchdogs.filekind import NotRegular, kind_words, open_regular, read_regular, read_tail
from watchdogs.fsprobe.bounded import FsError, probe
from watchdogs.result import Status
from watchdogs.state.store import StateStore

KIND = {"fifo": "a FIFO (named pipe)", "socket": "a socket", "folder": "a directory",
        "device": "a character device"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    db = StateStore(tmp_path / "state")
    yield db
    db.close()


@pytest.fixture
def special(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Makes one special file of a kind under tmp_path (a device: /dev/null, linked in)."""
    sockets: list[socket.socket] = []

    def make(kind: str, name: str = "train.log") -> Path:
        path = tmp_path / name
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":
            sockets.append(unix_socket_at(path))
        elif kind == "folder":
            path.mkdir()
        else:
            path.symlink_to("/dev/null")
        return path

    yield make
    for sock in sockets:
        sock.close()


@pytest.mark.parametrize("kind", sorted(KIND))
def test_each_special_file_is_refused_at_once_with_its_kind(kind: str, special: Callable[[str], Path]
                                                           ) -> None:
    path = special(kind)
    assert kind_words(os.stat(path).st_mode) == KIND[kind]
    started = time.monotonic()
    with pytest.raises(NotRegular) as raised:
        read_regular(path)
    with pytest.raises(NotRegular):
        read_tail(path, 100)
    assert time.monotonic() - started < 2
    assert str(raised.value) == f"{path} is {KIND[kind]}, not a regular file"
    assert isinstance(raised.value, OSError)  # callers that treat unreadable files go on working


def test_a_regular_file_reads_and_a_link_is_refused_without_following(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"step 1\nstep 2\n")
    assert read_regular(log) == b"step 1\nstep 2\n"
    assert read_tail(log, 7) == (b"step 2\n", 14)
    link = tmp_path / "link.log"
    link.symlink_to(log)
    fd = open_regular(link)
    os.close(fd)
    with pytest.raises(NotRegular, match="is a symbolic link, not a regular file"):
        open_regular(link, follow=False)


@pytest.mark.parametrize("kind", sorted(KIND))
def test_log_stale_names_a_special_log_path_as_unknown_within_seconds(
        kind: str, special: Callable[[str], Path], tmp_path: Path, store: StateStore) -> None:
    path = special(kind)
    config = write_config(tmp_path, f'[[check]]\nname = "hung"\ntype = "log_stale"\n'
                                    f'path = {json.dumps(str(path))}\nprogress = "step (\\\\d+)"\n'
                                    'probe_timeout = "20s"\n')
    started = time.monotonic()
    result = tick(config, store)[0]["hung"]
    assert time.monotonic() - started < 10  # far below the probe's 20 s: it never blocked
    assert result.status is Status.UNKNOWN, result
    assert f"{path} is {KIND[kind]}, not a log file" in result.summary
    assert "not responding" not in result.summary


def test_a_glob_skips_a_fifo_beside_a_real_log(special: Callable[[str], Path], tmp_path: Path,
                                               store: StateStore) -> None:
    (tmp_path / "slurm-1.out").write_text("step 1\n")
    special("fifo", "slurm-2.out")  # newer, but nothing to read
    config = write_config(tmp_path, '[[check]]\nname = "hung"\ntype = "log_stale"\n'
                                    'path = "slurm-*.out"\nmax_age = "10m"\n')
    result = tick(config, store)[0]["hung"]
    assert result.status is Status.OK and "slurm-1.out" in result.summary, result


def test_a_fifo_among_heartbeats_or_as_the_hang_log_does_not_block_the_probe(
        special: Callable[[str], Path], tmp_path: Path) -> None:
    beats = tmp_path / "hb"
    beats.mkdir()
    os.mkfifo(beats / "rank-0.json")
    os.mkfifo(beats / "hangs.jsonl")
    started = time.monotonic()
    assert probe("heartbeats", {"directory": str(beats)}, 20, str(beats)) == []
    with pytest.raises(FsError, match="hangs.jsonl is a FIFO \\(named pipe\\), not a regular file"):
        probe("newest", {"pattern": str(beats / "hangs.jsonl"), "tail_bytes": 100}, 20, "hang log")
    fifo = special("fifo", "hb2")
    with pytest.raises(FsError, match="hb2 is a FIFO \\(named pipe\\), not a folder"):
        probe("heartbeats", {"directory": str(fifo)}, 20, "heartbeats")
    assert time.monotonic() - started < 10


def test_a_job_log_that_is_a_fifo_is_named_in_the_alert(special: Callable[[str], Path]) -> None:
    fifo = special("fifo", "train-7.out")
    started = time.monotonic()
    tail = jobfiles.tail_logs([fifo], 20, 20)
    assert time.monotonic() - started < 10
    assert tail is not None and tail.lines == ()
    assert tail.problem == f"{fifo} is a FIFO (named pipe), not a log file"
