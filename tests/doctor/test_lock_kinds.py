"""What the doctor concludes about locks from the mount that holds the state folder: the
mount table is a recorded /proc/self/mountinfo whose mount point is the test's own folder
(lustre and NFS mounts cannot be made here); the lock itself is tried for real there."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from watchdogs.commands.doctor import checks
from watchdogs.result import Status
from watchdogs.state import locking

ROOT = "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"


def findings_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fs: str, source: str,
                 options: str) -> dict[str, checks.Finding]:
    table = tmp_path / "mountinfo"
    state = tmp_path / "state"
    state.mkdir()
    table.write_text(ROOT + f"98 22 0:51 / {tmp_path} rw,relatime shared:60 - {fs} {source} {options}\n")
    monkeypatch.setattr(checks, "MOUNTINFO", table)
    return {f.area: f for f in checks.check_state_dir(state)}


def test_lustre_with_localflock_is_a_warning_that_the_lock_is_this_nodes_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = findings_for(tmp_path, monkeypatch, "lustre", "10.0.0.1@tcp:/scratch", "rw,localflock")
    assert found["state"].facts["fs_type"] == "lustre" and found["state"].facts["network"] is True
    assert "the chain alone writes the database" in found["state"].summary
    assert found["locks"].status == Status.WARNING and "locks hold on one host only" in found["locks"].summary
    assert found["locks"].facts["lock_scope"] == "this node only" and "singleton" in found["locks"].fix


def test_nfs4_with_default_locking_is_shared_and_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = findings_for(tmp_path, monkeypatch, "nfs4", "filer:/home", "rw,vers=4.2,local_lock=none")
    assert found["locks"].status == Status.OK and found["locks"].facts["lock_scope"] == "shared"
    assert "filer:/home" in found["state"].summary


def test_sshfs_flock_is_local_to_the_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = findings_for(tmp_path, monkeypatch, "fuse.sshfs", "me@login:/home/me", "rw,user_id=0")
    assert found["locks"].status == Status.WARNING and found["locks"].facts["lock_scope"] == "this node only"


def test_a_folder_that_cannot_be_written_is_critical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere: this runs as the unprivileged test user")
    findings_for(tmp_path, monkeypatch, "ext4", "/dev/vda", "rw")
    (tmp_path / "state").chmod(0o500)
    try:
        result = checks.check_state_dir(tmp_path / "state")
    finally:
        (tmp_path / "state").chmod(0o700)
    assert result[0].status == Status.CRITICAL and "cannot write there" in result[0].summary
    assert "state_dir" in result[0].fix


@pytest.mark.parametrize(("fs", "source", "options", "kind", "status"), [
    ("orangefs", "tcp://meta:3334/orangefs", "rw", "local", Status.WARNING),  # a filesystem we do not know
    ("lustre", "10.0.0.1@tcp:/scratch", "rw,flock", "works", Status.OK),
    ("lustre", "10.0.0.1@tcp:/scratch", "rw,localflock", "local", Status.WARNING),
    ("nfs4", "filer:/home", "rw,vers=4.2", "works", Status.OK),
    ("ext4", "/dev/vda", "rw", "works", Status.OK),
])
def test_doctor_says_what_the_scheduler_will_conclude_about_locks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fs: str, source: str, options: str, kind: str,
        status: Status) -> None:
    """One answer: the doctor's `locks` finding is watchdogs.state.locking's, so an unknown
    filesystem is not "flock works (local fs)" in doctor and "locks hold on one host only" in
    the state folder's own view."""
    found = findings_for(tmp_path, monkeypatch, fs, source, options)
    scheduler = locking.probe(tmp_path / "state", (tmp_path / "mountinfo").read_text())
    assert scheduler.kind == kind
    assert found["locks"].facts["lock_kind"] == kind and found["locks"].status == status
    if kind == "local":
        assert found["locks"].summary == scheduler.note and "singleton" in found["locks"].fix
    assert found["state"].facts["fs_type"] == fs


def test_a_state_folder_not_created_yet_is_probed_in_its_parent_without_leaving_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mountinfo").write_text(ROOT)
    monkeypatch.setattr(checks, "MOUNTINFO", tmp_path / "mountinfo")
    found = {f.area: f for f in checks.check_state_dir(tmp_path / "not-yet" / "state")}
    assert "not created yet; probed in" in found["state"].summary
    assert found["locks"].facts["lock_kind"] == "works"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mountinfo"]


def test_nfs_with_local_lock_flock_is_a_warning_naming_the_option_to_drop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = findings_for(tmp_path, monkeypatch, "nfs4", "filer:/home", "rw,vers=4.2,local_lock=flock")
    assert found["locks"].status == Status.WARNING and found["locks"].facts["lock_scope"] == "this node only"
    assert "locks hold on one host only (nfs4 mounted with local_lock=flock)" in found["locks"].summary
    assert f"mount {tmp_path} without local_lock=flock" in found["locks"].fix
