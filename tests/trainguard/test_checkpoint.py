"""Checkpoint helpers on a real filesystem: atomic commit, keep-last-N, fallback."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from trainguard.checkpoints.checkpoint import (
    LATEST,
    MARKER,
    CheckpointError,
    Checkpoints,
    is_complete,
    step_name,
)


def writer(text: str):
    def write(directory: Path) -> None:
        (directory / "state.txt").write_text(text)
        (directory / "shard").mkdir()
        (directory / "shard" / "part-0").write_bytes(b"x" * 100)
    return write


def loader(seen: list[str]):
    def load(directory: Path) -> None:
        text = (directory / "state.txt").read_text()
        if not text.startswith("ok"):
            raise ValueError(f"cannot parse {text!r}")
        seen.append(text)
    return load


def test_a_commit_leaves_a_complete_directory_a_marker_and_the_latest_pointer(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path)
    ckpt = ckpts.save(7, writer("ok-7"))
    assert ckpt.path == tmp_path / step_name(7) and is_complete(ckpt.path)
    marker = json.loads((ckpt.path / MARKER).read_text())
    assert marker["step"] == 7 and marker["files"] == {"shard/part-0": 100, "state.txt": 4}
    assert (tmp_path / LATEST).read_text().strip() == step_name(7)
    assert not list(tmp_path.glob(".tmp-*"))


def test_only_the_last_n_are_kept_and_never_fewer_than_two(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="2 or more"):
        Checkpoints(tmp_path, keep=1)
    ckpts = Checkpoints(tmp_path, keep=3)
    for step in range(6):
        ckpts.save(step, writer(f"ok-{step}"))
    assert [c.step for c in ckpts.complete()] == [5, 4, 3]
    assert sorted(p.name for p in tmp_path.glob("step-*")) == [step_name(s) for s in (3, 4, 5)]


def test_a_save_cut_off_before_its_rename_is_invisible_and_cleaned_by_the_next(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path)
    ckpts.save(1, writer("ok-1"))
    cut = tmp_path / f".tmp-{step_name(2)}"
    cut.mkdir()
    (cut / "state.txt").write_text("ok-2 half")
    assert [c.step for c in ckpts.complete()] == [1]
    ckpts.save(3, writer("ok-3"))
    assert not cut.exists()


def test_a_truncated_file_makes_a_checkpoint_incomplete(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path)
    ckpts.save(1, writer("ok-1"))
    newest = ckpts.save(2, writer("ok-2"))
    (newest.path / "shard" / "part-0").write_bytes(b"x" * 10)
    assert not is_complete(newest.path)
    assert ckpts.latest() is not None and ckpts.latest().step == 1


def test_resume_falls_back_to_the_previous_checkpoint_when_loading_fails(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ckpts = Checkpoints(tmp_path)
    ckpts.save(1, writer("ok-1"))
    newest = ckpts.save(2, writer("ok-2"))
    (newest.path / "state.txt").write_text("XX-2")     # same size: the marker cannot tell
    seen: list[str] = []
    with caplog.at_level(logging.WARNING, logger="trainguard"):
        resumed = Checkpoints(tmp_path).resume(loader(seen))
    assert resumed is not None and resumed.step == 1 and seen == ["ok-1"]
    assert "cannot parse 'XX-2'" in caplog.text and "falling back" in caplog.text


def test_resume_refuses_to_start_over_when_no_checkpoint_loads(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path)
    ckpts.save(1, writer("bad-1"))
    ckpts.save(2, writer("bad-2"))
    with pytest.raises(CheckpointError, match="none of the 2 checkpoint"):
        ckpts.resume(loader([]))
    assert Checkpoints(tmp_path / "fresh").resume(loader([])) is None


def test_resaving_a_step_replaces_it_atomically(tmp_path: Path) -> None:
    ckpts = Checkpoints(tmp_path)
    ckpts.save(4, writer("ok-old"))
    ckpts.save(4, writer("ok-new"))
    seen: list[str] = []
    assert ckpts.resume(loader(seen)) is not None and seen == ["ok-new"]
    assert not list(tmp_path.glob(".old-*"))


def test_scratch_saves_are_copied_to_shared_storage_at_exit(tmp_path: Path) -> None:
    shared, scratch = tmp_path / "shared", tmp_path / "scratch"
    ckpts = Checkpoints(shared, scratch=scratch)
    ckpts.save(5, writer("ok-5"))
    assert (scratch / step_name(5)).is_dir() and not shared.exists()
    copied = ckpts.sync_to_shared()
    assert copied is not None and is_complete(shared / step_name(5))
    seen: list[str] = []
    assert Checkpoints(shared).resume(loader(seen)).step == 5 and seen == ["ok-5"]
    assert ckpts.sync_to_shared() is None          # already there
