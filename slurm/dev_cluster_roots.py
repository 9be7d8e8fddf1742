"""Slurm releases other than the host's for slurm/dev-cluster: a Debian root filesystem per
release (built once with debootstrap, cached), daemons chrooted into it, and client wrappers.

- The root of a release is built once into a cache folder (~/.cache/watchdogs-dev-cluster/
  roots/<suite>-<release>) and reused: a second `up` costs nothing here.
- Each daemon runs chrooted into the root, in a mount namespace of its own, where the host's
  /proc, /sys, /dev, munged's socket, users (/etc/passwd, /etc/group), /etc/hosts and the
  folders jobs need (/tmp, /home, /root, the checkout, the Python of its venv) are bound in,
  and the host's own Python read-only (a user's venv made with /usr/bin/python3 needs it).
  The binds live only in that namespace: they vanish with the daemon, so nothing is left
  mounted on the host and no `rm -rf` of a cluster or cache folder can reach through a bind
  into /tmp or /home.
- Slurm clients speak only to controllers at most two releases apart, so every Slurm command
  of the cluster runs from its root: `<cluster>/bin/<command>` runs the root's binary through
  the root's dynamic loader and libraries. It keeps the caller's uid and filesystem (sbatch
  must see the user's files), needs no privilege, and works inside jobs too (the same paths
  are bound into the root).
Only the standard library is used: this runs before the project is installed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import dev_cluster_cgroups

# release -> Debian suite that ships it (checked: trixie 24.11.5, sid 26.05.5).
SUITES = {"24.11": "trixie", "26.05": "sid"}
MIRROR = os.environ.get("WATCHDOGS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# Slurm's daemons and clients; munge for libmunge (the host's munged serves them);
# monitoring-plugins-basic for the drop-ins jobs run; procps for ps/pkill in jobs; the shared
# libraries the host's Python (pyenv-built) and torch load when a job runs them in the root.
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurmdbd", "munge", "monitoring-plugins-basic",
            "procps", "libssl3t64", "zlib1g", "libncursesw6", "libtinfo6", "libsqlite3-0", "libffi8",
            "liblzma5", "libbz2-1.0", "libreadline8t64", "libuuid1", "libexpat1", "libstdc++6",
            "libgomp1")
LOADER = "lib64/ld-linux-x86-64.so.2"
LIB_DIRS = ("usr/lib/x86_64-linux-gnu/slurm-wlm", "usr/lib/x86_64-linux-gnu/slurm",
            "usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
PLUGIN_DIRS = ("usr/lib/x86_64-linux-gnu/slurm-wlm", "usr/lib/x86_64-linux-gnu/slurm")
# Folders of the host seen at the same path inside the root (when they exist): where users,
# tests and the CI keep checkouts, venvs, Pythons, job outputs and the cluster's own folder.
HOST_DIRS = ("/tmp", "/var/tmp", "/home", "/root", "/work", "/srv", "/opt")
# shadow too: Slurm 26.05 gets a job's login environment (`su - USER`) for --export=ALL,VAR=...,
# and PAM's account check inside the root fails for a user its own shadow file does not list.
HOST_FILES = ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow", "/etc/hosts")
SYSTEM_DIRS = ("/proc", "/sys", "/dev", "/run/munge")
# The host's own Python, for a user's venv made with it (`python3 -m venv` in a login shell:
# pyvenv.cfg says home = /usr/bin, bin/python3 -> /usr/bin/python3). The roots have no Python
# at all, so such a job failed with "/home/u/sw/.venv/bin/python: No such file or directory".
# Its interpreters and standard library are bound read-only at the same paths (the
# interpreter links only libc, libm, libz and libexpat, which the roots have, and
# lib-dynload's modules need the libraries PACKAGES lists for the pyenv Python).
HOST_PYTHON_BINARIES = re.compile(r"python3(\.\d+)?")
HOST_PYTHON_LIBS = re.compile(r"python3\.\d+")
# The mount points made in a root for those binds: a path listed here is ours, any other
# path the root has is its own and is never bound over.
HOST_BINDS = ".host-binds.json"


class RootError(Exception):
    """The root filesystem could not be built or does not hold the asked release."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "watchdogs-dev-cluster" / "roots"


def host_release() -> str:
    """The host's Slurm release, e.g. "22.05" (from `slurmctld -V`: "slurm-wlm 22.05.8")."""
    exe = shutil.which("slurmctld") or shutil.which("sinfo")
    if not exe:
        return ""
    out = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=30).stdout
    return release_of(out)


def release_of(version_line: str) -> str:
    words = version_line.split()
    parts = words[-1].split(".") if words else []
    return ".".join(parts[:2]) if len(parts) >= 2 else ""


def root_path(release: str) -> Path:
    return cache_dir() / f"{SUITES[release]}-{release}"


def ensure_debootstrap() -> None:
    if shutil.which("debootstrap"):
        return
    if os.geteuid() != 0:
        raise RootError("debootstrap is missing and we are not root to install it")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", "debootstrap"], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def ensure_root(release: str, log: Path) -> Path:
    """The cached root of `release`, built first if missing (about a minute, ~300 MB)."""
    final = root_path(release)
    if (final / ".complete").exists():
        return final
    if os.geteuid() != 0:
        raise RootError(f"the Slurm {release} root {final} is not built and we are not root")
    ensure_debootstrap()
    final.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the final place and renamed: two clusters starting at once never see a
    # half-built root.
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
    target = work / "root"
    with open(log, "ab") as out:
        rc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                             SUITES[release], str(target), MIRROR], stdout=out,
                            stderr=subprocess.STDOUT).returncode
    if rc != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise RootError(f"debootstrap {SUITES[release]} failed (exit {rc}); see {log}")
    try:
        finish_root(target, release)
    except RootError:
        shutil.rmtree(work, ignore_errors=True)
        raise
    try:
        target.rename(final)
    except OSError:
        if not (final / ".complete").exists():
            raise
    shutil.rmtree(work, ignore_errors=True)
    return final


def in_root(root: Path, path: str) -> Path:
    """path as the root sees it: absolute symlinks (Debian's alternatives, /lib64) resolved
    against the root, not the host."""
    current = root
    parts = list(Path(path.lstrip("/")).parts)
    for _ in range(64):
        if not parts:
            return current
        nxt = current / parts.pop(0)
        if nxt.is_symlink():
            target = os.readlink(nxt)
            parts = list(Path(target.lstrip("/")).parts) + parts
            if target.startswith("/"):
                current = root
            continue
        current = nxt
    raise RootError(f"too many symlinks resolving {path} in {root}")


def finish_root(target: Path, release: str) -> None:
    """Checks the release a fresh root holds and makes the mount points of the binds."""
    got = root_release(target)
    if got != release:
        raise RootError(f"Debian {SUITES[release]} now ships Slurm {got or '?'}, not {release}")
    for host_dir in HOST_DIRS:
        # Mount points for the binds (inside the root, never on the host).
        (target / host_dir.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (target / "run" / "munge").mkdir(parents=True, exist_ok=True)
    (target / ".complete").write_text(json.dumps({"release": release, "suite": SUITES[release]}))


def loader_argv(root: Path, program: str, argv0: str) -> list[str]:
    dirs = [str(in_root(root, d)) for d in LIB_DIRS if in_root(root, d).is_dir()]
    libs = ":".join(dict.fromkeys(dirs))
    return [str(in_root(root, LOADER)), "--library-path", libs, "--argv0", argv0,
            str(in_root(root, program))]


def root_release(root: Path) -> str:
    out = subprocess.run([*loader_argv(root, "usr/sbin/slurmctld", "slurmctld"), "-V"],
                         capture_output=True, text=True, timeout=60)
    return release_of(out.stdout)


def plugin_dir(root: Path) -> Path:
    """The root's plugins at their host path; the same path works inside the root because
    the folder holding the cache is bound in at the same place."""
    return next((root / d for d in PLUGIN_DIRS if (root / d / "select_cons_tres.so").exists()),
                root / PLUGIN_DIRS[0])


def client_commands(root: Path) -> list[str]:
    """Every command of slurm-client (squeue, sbatch, ... as the root's dpkg lists them)."""
    listing = root / "var" / "lib" / "dpkg" / "info" / "slurm-client.list"
    names = [Path(p).name for p in listing.read_text().split() if p.startswith("/usr/bin/")]
    return sorted(n for n in names if (root / "usr" / "bin" / n).is_file())


def write_wrappers(root: Path, bin_dir: Path) -> None:
    """<cluster>/bin/<command>: the root's command through the root's loader, for anyone."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    bin_dir.chmod(0o755)
    for name in client_commands(root):
        argv = " ".join(_sh_quote(a) for a in loader_argv(root, f"usr/bin/{name}", name))
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n# Slurm's {name} from {root} (written by slurm/dev-cluster)\n"
                        f'exec {argv} "$@"\n')
        path.chmod(0o755)


def _sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def bind_sources(extra: list[str]) -> list[str]:
    """Host folders bound at the same path into the root: the usual ones and the top folder
    of each extra path (the checkout, the venv's Python, the cache of roots)."""
    tops = {"/" + Path(p).resolve().parts[1] for p in extra if len(Path(p).resolve().parts) > 1}
    wanted = [d for d in HOST_DIRS if Path(d).is_dir()]
    wanted += sorted(t for t in tops if t not in wanted and Path(t).is_dir()
                     and t not in ("/usr", "/etc", "/lib", "/lib64", "/bin", "/sbin", "/var"))
    return wanted


def chroot_argv(root: Path, argv: list[str], extra: list[str], cgroup_subtrees: dict[str, str],
                stash: Path) -> list[str]:
    """argv run chrooted into root ("/": not chrooted), in a mount namespace of its own with
    the binds and, if given, the cluster's own cgroup hierarchy (dev_cluster_cgroups)."""
    spec = json.dumps({"root": str(root), "dirs": bind_sources(extra) if str(root) != "/" else [],
                       "argv": argv, "cgroups": cgroup_subtrees, "stash": str(stash)})
    return ["unshare", "--mount", "--propagation", "private", sys.executable,
            str(Path(__file__).resolve()), "exec-in-root", spec]


def exec_in_root(spec_json: str) -> None:
    """Runs in the new mount namespace: bind, chroot, exec (the PID stays the daemon's)."""
    spec = json.loads(spec_json)
    root = Path(spec["root"])
    if str(root) != "/":
        bind_host(root, spec["dirs"])
    if spec["cgroups"]:
        dev_cluster_cgroups.isolate(root, spec["cgroups"], Path(spec["stash"]))
    if str(root) != "/":
        os.chroot(root)
        os.chdir("/")
    os.execvp(spec["argv"][0], spec["argv"])


def host_python() -> list[str]:
    """The host's /usr/bin/python3* interpreters (through their links) and their standard
    libraries (/usr/lib/python3.N holding os.py, the landmark a venv's home leads to)."""
    found = [str(p) for p in sorted(Path("/usr/bin").glob("python3*"))
             if HOST_PYTHON_BINARIES.fullmatch(p.name) and p.is_file() and os.access(p, os.X_OK)]
    found += [str(p) for p in sorted(Path("/usr/lib").glob("python3.*"))
              if HOST_PYTHON_LIBS.fullmatch(p.name) and (p / "os.py").is_file()]
    return found


def prepare_host_python(root: Path) -> list[str]:
    """Makes the mount points of the host's Python in the root, once and idempotently (run
    by `up` before any daemon starts), never where the root has a path of its own; returns
    the host paths to bind (HOST_BINDS lists them)."""
    marker = root / HOST_BINDS
    try:
        mine = set(json.loads(marker.read_text()))
    except (OSError, ValueError):
        mine = set()
    for src in host_python():
        dst = in_root(root, str(Path(src).parent)) / Path(src).name
        if dst.exists() or dst.is_symlink():
            if _empty(dst):  # a mount point of ours whose listing was lost: a root has no empty Python
                mine.add(src)
                # No mode: unbound (a daemon started before `up` made it), an empty executable
                # file would "run" and exit 0; a mode-0 one fails with "Permission denied".
                dst.chmod(0)
            continue  # the root's own (or made by an earlier `up`: listed already)
        if Path(src).is_dir():
            dst.mkdir(mode=0)
        else:
            dst.touch(mode=0)
        mine.add(src)
    mine = {p for p in mine if Path(p).exists()}
    tmp = marker.with_name(f"{HOST_BINDS}.{os.getpid()}")
    tmp.write_text(json.dumps(sorted(mine)))
    tmp.replace(marker)  # atomic: two clusters coming up on one root at once
    return sorted(mine)


def _empty(path: Path) -> bool:
    if path.is_symlink():
        return False
    if path.is_dir():
        return not any(path.iterdir())
    return path.is_file() and path.stat().st_size == 0


def host_binds(root: Path) -> list[str]:
    try:
        return [p for p in json.loads((root / HOST_BINDS).read_text()) if Path(p).exists()]
    except (OSError, ValueError):
        return []


def bind_host(root: Path, dirs: list[str]) -> None:
    for src in [*SYSTEM_DIRS, *dirs]:
        if not Path(src).exists():
            continue
        dst = root / src.lstrip("/")
        dst.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--rbind", src, str(dst)], check=True)
    for src in HOST_FILES:
        if not Path(src).exists():
            continue
        dst = root / src.lstrip("/")
        if not dst.exists():
            dst.touch()
        subprocess.run(["mount", "--bind", src, str(dst)], check=True)
    for src in host_binds(root):
        # Read-only: a job must not change the host's Python through the root.
        dst = in_root(root, str(Path(src).parent)) / Path(src).name
        subprocess.run(["mount", "--bind", "-o", "ro", src, str(dst)], check=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "exec-in-root":
        exec_in_root(sys.argv[2])
    sys.exit("usage: dev_cluster_roots.py exec-in-root SPEC (used by slurm/dev-cluster)")
