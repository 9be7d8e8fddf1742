"""The one name of the cluster in every message: Slurm's ClusterName, the host only where
there is no Slurm. Alerts from `run --once` on a login node and from the chain's job on a
compute node must carry the same name, or an alert and its resolution look unrelated."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from watchdogs.errors import SlurmError
from watchdogs.slurmctl.runner import SlurmRunner, run_slurm

_CLUSTER_NAME = re.compile(r"(?im)^\s*ClusterName\s*=\s*(\S+)")
DEFAULT_CONF = Path("/etc/slurm/slurm.conf")


def from_conf(env: Mapping[str, str]) -> str | None:
    """ClusterName from the slurm.conf this process would use ($SLURM_CONF or the default)."""
    conf = Path(env.get("SLURM_CONF") or DEFAULT_CONF)
    try:
        match = _CLUSTER_NAME.search(conf.read_text(errors="replace"))
    except OSError:
        return None
    return match.group(1) if match else None


def from_controller(env: Mapping[str, str], runner: SlurmRunner) -> str | None:
    """ClusterName as the controller says (configless sites have no local slurm.conf)."""
    try:
        reply = runner(["scontrol", "show", "config"], timeout=5.0, env=dict(env))
    except SlurmError:
        return None
    match = re.search(r"(?m)^ClusterName\s*=\s*(\S+)", reply.stdout)
    return match.group(1) if match else None


def cluster_name(configured: str | None, host: str, env: Mapping[str, str] | None = None,
                 runner: SlurmRunner = run_slurm) -> str:
    """`[alerts] cluster`, else $SLURM_CLUSTER_NAME (inside a job), else slurm.conf's
    ClusterName, else the controller's, else the host name (no Slurm here)."""
    env = os.environ if env is None else env
    return (configured or env.get("SLURM_CLUSTER_NAME") or from_conf(env)
            or from_controller(env, runner) or host)
