"""cgroups for slurm/dev-cluster: memory enforced by the kernel, as on production clusters.

Slurm's cgroup/v1 plugin puts each job under <mountpoint>/<controller>/slurm/uid_U/job_J.
Job ids start at 1 in every dev cluster and several clusters share this machine, so each
cluster gets a subtree of its own, `wdc-<hash of its folder>`, created under the cgroup this
process already lives in (a machine that limits us keeps limiting the jobs). Each Slurm daemon
runs in a mount namespace of its own where a tmpfs covers /sys/fs/cgroup and each controller
folder there is the cluster's subtree: Slurm sees a whole cgroup v1 hierarchy that is only its
cluster's. Nothing is mounted on the host; `down` removes the (then empty) subtrees.
Only the standard library is used: this runs before the project is installed.
"""
from __future__ import annotations

import contextlib
import hashlib
import subprocess
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# freezer: proctrack/cgroup; memory: ConstrainRAMSpace; cpuset/devices: task/cgroup's
# other constraints (off here, but the plugin opens them); cpu/cpuacct: accounting.
CONTROLLERS = ("memory", "freezer", "cpuset", "devices", "cpuacct", "cpu")


def name_for(cluster: Path) -> str:
    return "wdc-" + hashlib.sha1(str(cluster).encode()).hexdigest()[:10]


def own_path(controller: str) -> str:
    """The cgroup (relative to the controller's mount) this process lives in."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            return path.lstrip("/")
    return ""


def subtree(controller: str, name: str) -> Path:
    base = CGROUP_ROOT / controller
    own = own_path(controller)
    return (base / own if own else base) / name


def unavailable() -> str:
    """"" when cgroup v1 with a writable memory controller is here; else why not."""
    if not (CGROUP_ROOT / "memory" / "memory.limit_in_bytes").exists():
        return f"no cgroup v1 memory controller under {CGROUP_ROOT}"
    probe = subtree("memory", "wdc-probe")
    try:
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError as e:
        return f"cannot create a memory cgroup ({probe}): {e}"
    return ""


def prepare(cluster: Path) -> dict[str, str]:
    """Creates the cluster's subtree in each controller; controller -> host path."""
    name, made = name_for(cluster), {}
    for ctrl in CONTROLLERS:
        if not (CGROUP_ROOT / ctrl).is_dir():
            continue
        path = subtree(ctrl, name)
        path.mkdir(exist_ok=True)
        if ctrl == "cpuset":
            # A cpuset child starts empty and takes no task until given CPUs and memory nodes.
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((path.parent / knob).read_text())
        made[ctrl] = str(path)
    return made


def remove(cluster: Path) -> None:
    """Removes the cluster's (empty, once its daemons and jobs ended) cgroups, deepest first."""
    name = name_for(cluster)
    for ctrl in CONTROLLERS:
        top = subtree(ctrl, name)
        if not top.is_dir():
            continue
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts),
                      reverse=True)
        for p in [*dirs, top]:
            with contextlib.suppress(OSError):
                p.rmdir()


def isolate(sysroot: Path, subtrees: dict[str, str], stash: Path) -> None:
    """In the daemon's own mount namespace: a tmpfs on <sysroot>/sys/fs/cgroup holding only
    the cluster's subtrees. `stash` (an empty folder) keeps the host's hierarchy reachable
    while the tmpfs covers it."""
    target = sysroot / "sys" / "fs" / "cgroup"
    stash.mkdir(parents=True, exist_ok=True)
    run(["mount", "--rbind", str(CGROUP_ROOT), str(stash)])
    run(["mount", "-t", "tmpfs", "-o", "mode=755", "wdc-cgroup", str(target)])
    for ctrl, host_path in subtrees.items():
        (target / ctrl).mkdir()
        src = stash / Path(host_path).relative_to(CGROUP_ROOT)
        run(["mount", "--bind", str(src), str(target / ctrl)])


def run(argv: list[str]) -> None:
    subprocess.run(argv, check=True)
