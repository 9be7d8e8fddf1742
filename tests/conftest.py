"""Shared fixtures: the real local Slurm cluster (brought up once per run)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEV_CLUSTER = REPO / "slurm" / "dev-cluster"


def _cluster_dir() -> Path:
    return Path(os.environ.get("WATCHDOGS_CLUSTER_DIR", "/tmp/watchdogs-dev-cluster"))


def _can_have_slurm() -> str | None:
    """None when the cluster can be brought up; else the reason it cannot."""
    if shutil.which("slurmctld") and shutil.which("munged"):
        return None
    if os.geteuid() == 0 and shutil.which("apt-get"):
        return None
    return "slurm-wlm/munge are not installed and apt-get is not available as root to install them"


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Path]:
    """The dev cluster's slurm.conf. Reuses a running cluster (e.g. from `make test`) and
    leaves it running; otherwise brings one up for this session and down at the end."""
    reason = _can_have_slurm()
    if reason is not None:
        pytest.skip(reason)
    conf = _cluster_dir() / "slurm.conf"
    status = subprocess.run([sys.executable, str(DEV_CLUSTER), "status"], capture_output=True)
    started_here = status.returncode != 0
    if started_here and os.geteuid() != 0:
        pytest.fail(f"the dev cluster in {_cluster_dir()} is down, and only root can start its "
                    "daemons: run `slurm/dev-cluster up` as root (make test does)", pytrace=False)
    if started_here:
        subprocess.run([sys.executable, str(DEV_CLUSTER), "up"], check=True, stdout=subprocess.DEVNULL)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    yield conf
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old
    if started_here:
        subprocess.run([sys.executable, str(DEV_CLUSTER), "down"], check=False)


@pytest.fixture
def peer() -> str:
    """The name of a second unprivileged user in this user's group (tests/suite.py makes
    it), who acts through tests.helpers.as_peer. Skipped, saying why, when there is none
    (a developer's plain `pytest`), or when this user's group is not its group."""
    import pwd

    from tests.helpers import PEER

    try:
        mate = pwd.getpwnam(PEER)
    except KeyError:
        pytest.skip(f"no user {PEER!r}: tests/suite.py (run as root) creates it")
    if mate.pw_gid != os.getgid() or os.geteuid() == 0:
        pytest.skip(f"{PEER!r} is not in this user's group: runs in the test user's pass of tests/suite.py")
    return PEER


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the cluster (directly or through a fixture) is a Slurm test:
    `-m slurm` then selects all that a Slurm release can change (the release matrix).
    Tests marked `root` run only in the suite's root pass (tests/suite.py); started as an
    ordinary user they are skipped, saying why, instead of failing on a mount."""
    skip = pytest.mark.skip(reason="needs root: runs in the root pass of tests/suite.py")
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
        if os.geteuid() != 0 and item.get_closest_marker("root") is not None:
            item.add_marker(skip)
