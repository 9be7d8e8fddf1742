"""`nodes` on the real local cluster: a drained node is reported with its reason once (the
fingerprint stays the same while the set of bad nodes does), resumed -> OK; capacity below
min_available; a node going bad again and again; the nodes of a watched job."""
from __future__ import annotations

import contextlib
import getpass
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checks.conftest import Jobs, tick, unreachable_conf, write_config
from tests.helpers import admin_scontrol, job_state, sh, wait_for
from watchdogs.result import Status
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm


def node_state(node: str) -> str:
    return sh("sinfo", "-h", "-N", "-n", node, "-o", "%T").split()[0]


class Nodes:
    def __init__(self) -> None:
        self.touched: set[str] = set()

    def drain(self, node: str, reason: str) -> None:
        self.touched.add(node)
        admin_scontrol("update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")

    def resume(self, node: str) -> None:
        with contextlib.suppress(RuntimeError):
            admin_scontrol("update", f"NodeName={node}", "State=RESUME")
        wait_for(lambda: node_state(node) in ("idle", "mixed", "allocated"), what=f"{node} back")


@pytest.fixture
def nodes(slurm_cluster: Path) -> Iterator[Nodes]:
    tracker = Nodes()
    try:
        yield tracker
    finally:
        for node in tracker.touched:
            tracker.resume(node)


def config_for(tmp_path: Path, **opts: str | int) -> str:
    keys = "\n".join(f"{k} = {json.dumps(v)}" for k, v in opts.items())
    return f'[[check]]\nname = "nodes"\ntype = "nodes"\n{keys}\n'


def test_drained_node_is_reported_once_with_its_reason_then_resolved(tmp_path: Path, store: StateStore,
                                                                     nodes: Nodes) -> None:
    config = write_config(tmp_path, config_for(tmp_path, partition="debug"))
    assert tick(config, store)[0]["nodes"].status is Status.OK
    nodes.drain("node2", "bad gpu")
    first = tick(config, store)[0]["nodes"]
    assert first.status is Status.WARNING
    assert "node2 drained: bad gpu (by root since" in first.summary and "[new]" in first.summary
    assert "1 drained of 2; 1 usable" in first.summary
    second = tick(config, store)[0]["nodes"]
    assert second.status is Status.WARNING and "[new]" not in second.summary
    assert first.fingerprint == second.fingerprint == "node2"
    nodes.resume("node2")
    resolved = tick(config, store)[0]["nodes"]
    assert resolved.status is Status.OK and resolved.fingerprint == ""


def test_capacity_below_min_available_is_critical(tmp_path: Path, store: StateStore, nodes: Nodes) -> None:
    config = write_config(tmp_path, config_for(tmp_path, partition="debug", min_available="100%"))
    nodes.drain("node1", "maintenance")
    result = tick(config, store)[0]["nodes"]
    assert result.status is Status.CRITICAL
    assert "below min_available 2" in result.summary


def test_a_node_that_keeps_coming_back_bad_is_called_out(tmp_path: Path, store: StateStore,
                                                         nodes: Nodes) -> None:
    config = write_config(tmp_path, config_for(tmp_path, partition="debug", flapping=2))
    nodes.drain("node2", "xid 79")
    assert "went bad" not in tick(config, store)[0]["nodes"].summary
    nodes.resume("node2")
    tick(config, store)
    nodes.drain("node2", "xid 79 again")
    again = tick(config, store)[0]["nodes"]
    assert "[went bad 2 times in 7 days: keeps coming back bad]" in again.summary


def test_only_the_nodes_of_the_watched_job_count(tmp_path: Path, store: StateStore, nodes: Nodes,
                                                 jobs: Jobs) -> None:
    name = f"wd-nodes-{tmp_path.name[-8:]}"
    job = jobs.submit("--partition=debug", name=name)
    wait_for(lambda: job_state(job) == "RUNNING", what="job running")
    used = sh("squeue", "-h", "-j", job, "-o", "%N").strip()
    other = "node1" if used == "node2" else "node2"
    config = write_config(tmp_path, f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n'
                          + config_for(tmp_path, job="train"))
    nodes.drain(other, "not ours")
    assert tick(config, store)[0]["nodes"].status is Status.OK
    nodes.drain(used, "ours")
    result = tick(config, store, only=("nodes",))[0]["nodes"]
    assert result.status is Status.WARNING
    assert f"{used} draining: ours" in result.summary and other not in result.summary


def test_unreachable_controller_is_unknown(slurm_cluster: Path, tmp_path: Path, store: StateStore) -> None:
    config = write_config(tmp_path, config_for(tmp_path))
    env = {"SLURM_CONF": str(unreachable_conf(slurm_cluster, tmp_path))}
    result = tick(config, store, env=env)[0]["nodes"]
    assert result.status is Status.UNKNOWN
    assert "Unable to contact slurm controller" in result.summary


def test_many_nodes_checks_share_one_sinfo_call(tmp_path: Path, store: StateStore) -> None:
    log, shim = tmp_path / "calls.log", tmp_path / "bin"
    shim.mkdir()
    real = subprocess.run(["which", "sinfo"], capture_output=True, text=True, check=True).stdout.strip()
    (shim / "sinfo").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real} "$@"\n')
    (shim / "sinfo").chmod(stat.S_IRWXU)
    body = "".join(f'[[check]]\nname = "n{p}"\ntype = "nodes"\npartition = "{p}"\n'
                   for p in ("debug", "cpu", "low", "high"))
    results = tick(write_config(tmp_path, body), store, env={"PATH": f"{shim}:{os.environ['PATH']}"})[0]
    assert len(log.read_text().splitlines()) == 1
    assert all(r.status is Status.OK for r in results.values())


def test_only_the_nodes_of_a_reservation_count(tmp_path: Path, store: StateStore, nodes: Nodes) -> None:
    name = f"wdtest-{tmp_path.name[-8:]}"
    admin_scontrol("create", "reservation", f"ReservationName={name}", "StartTime=now", "Duration=10",
                   "Nodes=node3", f"Users={getpass.getuser()}")
    try:
        config = write_config(tmp_path, config_for(tmp_path, reservation=name))
        nodes.drain("node1", "outside the reservation")
        assert tick(config, store)[0]["nodes"].status is Status.OK
        nodes.drain("node3", "inside")
        result = tick(config, store)[0]["nodes"]
        assert result.status is Status.WARNING and "node3 drained: inside" in result.summary
        missing = write_config(tmp_path, config_for(tmp_path, reservation="no-such-reservation"))
        assert tick(missing, store)[0]["nodes"].status is Status.UNKNOWN
    finally:
        with contextlib.suppress(RuntimeError):
            admin_scontrol("delete", f"ReservationName={name}")
