#!/usr/bin/env python3
"""Run the test suite as users run the project: as an ordinary Unix user.

    tests/suite.py [--markers EXPR] [--label NAME] [-- PYTEST_ARGS...]

Started as root (by `make test` or CI), it
1. creates the unprivileged user `wdtest` (once) and registers it in the dev cluster's
   accounting, so its jobs are recorded as any user's are;
2. makes the checkout, the venv and the venv's interpreter reachable by that user (the
   interpreter often lives under /root, which others cannot traverse);
3. runs `pytest -m "(EXPR) and not root"` as `wdtest` (everything a user does: watchdogs,
   sbatch, trainings, switch files, permission checks), then `pytest -m "(EXPR) and root"`
   as root: only the tests whose docstring says why they need root (mounts, daemons,
   other users' files, cgroups);
4. prints one closing line for both passes: `suite[LABEL]: N passed, N failed, N skipped`.

Started by an ordinary user, it runs one pass as that user and leaves the root tests out.
Only the standard library: it runs before the project is importable by the test user.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
USER = "wdtest"
PEER = "wdpeer"
"""A second unprivileged user in USER's group: a group mate in a shared project space, the
attacker of the trust tests (tests/privileged.py as-peer; `peer` fixture)."""
# pytest's "no tests were collected": a pass with nothing selected is not a failure.
NO_TESTS = 5


@dataclass(frozen=True)
class Tally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.passed + other.passed, self.failed + other.failed,
                     self.skipped + other.skipped)


def say(msg: str) -> None:
    print(f"suite: {msg}", file=sys.stderr, flush=True)


def ensure_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        pass
    say(f"creating the unprivileged test user {USER!r}")
    # Not check=True: the release matrix starts several suites at once, and another may
    # have made the user a moment ago (useradd then fails); the look-up below decides.
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment",
                    "slurm-watchdogs tests", USER], check=False)
    return pwd.getpwnam(USER)


def ensure_peer() -> pwd.struct_passwd:
    """PEER, once: no home, no login, USER's group as its own. Not in Slurm accounting: it
    only makes files, as a group mate does."""
    try:
        return pwd.getpwnam(PEER)
    except KeyError:
        pass
    say(f"creating {USER!r}'s group mate {PEER!r}")
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--gid",
                    str(pwd.getpwnam(USER).pw_gid), "--comment", "slurm-watchdogs tests, a group mate",
                    PEER], check=False)
    return pwd.getpwnam(PEER)


def reachable_by_others(path: Path) -> bool:
    """Every folder on the way can be traversed by others and the file read (a stand-in for
    "the test user can open it", with no need to become that user)."""
    path = path.resolve()
    for parent in reversed(path.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def grant_traverse(path: Path) -> None:
    """Give others search (x, not read) permission on each folder above `path` that lacks it:
    the interpreter and the checkout can then be opened by name, not listed."""
    for parent in reversed(path.resolve().parents):
        mode = os.stat(parent).st_mode
        if not mode & stat.S_IXOTH:
            say(f"granting others traverse (o+x) on {parent} so {USER} can reach {path}")
            os.chmod(parent, stat.S_IMODE(mode) | stat.S_IXOTH)


def make_reachable(python: Path) -> None:
    for path in (REPO / "pyproject.toml", python, Path(os.path.realpath(python))):
        if not reachable_by_others(path):
            grant_traverse(path)
    if not reachable_by_others(REPO / "pyproject.toml"):
        sys.exit(f"suite: {REPO} is not readable by others (a umask of 077?); "
                 f"{USER} cannot run the tests from it")


def precompile(python: Path) -> None:
    """The test user cannot write __pycache__ in the checkout: compile once as root, or every
    `watchdogs` subprocess of the suite would compile the whole package again."""
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", "watchdogs", "notifiers",
                    "trainguard", "tests", "benchmarks"], cwd=REPO, check=False,
                   stdout=subprocess.DEVNULL)


def allow_privileged(python: Path) -> None:
    """sudo for exactly tests/privileged.py (mounts, stopping a node's slurmd), for the test
    user only; one rule per checkout, so side-by-side checkouts keep their own."""
    if not Path("/usr/bin/sudo").exists():
        say("installing sudo (the test user's mounts and node stops go through it)")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "-q", "sudo"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
    script = REPO / "tests" / "privileged.py"
    # sudo skips files in sudoers.d whose names hold a dot: a hex digest of the path.
    digest = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    rule = Path("/etc/sudoers.d") / f"watchdogs-tests-{digest}"
    text = f"{USER} ALL=(root) NOPASSWD: {python} {script} *\n"
    fd = os.open(rule, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o440)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def trust_checkout_in_git() -> None:
    """git refuses a repository another user owns ("dubious ownership"); the suite reads its
    own file list with git (test_suppressions), so the test user trusts this checkout."""
    as_user = ["runuser", "-u", USER, "--", "git", "config", "--global"]
    known = subprocess.run([*as_user, "--get-all", "safe.directory"], capture_output=True,
                           text=True, check=False).stdout.split()
    if str(REPO) not in known:
        subprocess.run([*as_user, "--add", "safe.directory", str(REPO)], check=False)


def register_in_accounting() -> None:
    """An association for the test user, so sacct records its jobs (idempotent)."""
    if not os.environ.get("SLURM_CONF"):
        return
    sys.path.insert(0, str(REPO / "slurm"))
    import dev_cluster_accounting as acct  # the dev cluster's own account name

    done = subprocess.run(["sacctmgr", "-i", "add", "user", USER, f"Account={acct.ACCOUNT}"],
                          capture_output=True, text=True, timeout=30, check=False)
    out = (done.stdout + done.stderr).strip()
    if done.returncode != 0 and "Nothing new added" not in out:
        say(f"could not register {USER} in accounting: {out}")


def tally(junit: Path) -> Tally:
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return Tally()
    suites = [root] if root.tag == "testsuite" else list(root)
    total = Tally()
    for s in suites:
        tests, fail = int(s.get("tests", 0)), int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped = int(s.get("skipped", 0))
        total += Tally(tests - fail - skipped, fail, skipped)
    return total


def failed_tests(junit: Path) -> list[str]:
    """The ids of the failed tests of one pass: the matrix shows only a log's last lines, so
    the closing lines name every failure, including one far up in the user pass."""
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return []
    return [f"{case.get('classname', '')}::{case.get('name', '')}" for case in root.iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None]


def own_basetemp(args: list[str], who: str) -> list[str]:
    """A `--basetemp=DIR` becomes DIR-<who>, emptied first: the two passes (two users) must
    not share a folder that the other cannot delete, and the privileged helper mounts only
    inside a folder its caller owns."""
    out = []
    for arg in args:
        if arg.startswith("--basetemp="):
            folder = Path(arg.split("=", 1)[1] + f"-{who}")
            shutil.rmtree(folder, ignore_errors=True)
            arg = f"--basetemp={folder}"
        out.append(arg)
    return out


def run_pass(python: Path, markers: str, as_user: bool, args: list[str], junit: Path) -> int:
    who = USER if as_user else pwd.getpwuid(os.getuid()).pw_name
    args = own_basetemp(args, who)
    argv = [str(python), "-m", "pytest", "-m", markers, f"--junitxml={junit}", *args]
    if as_user:
        # runuser keeps the environment (SLURM_CONF, WATCHDOGS_CLUSTER_DIR, PATH) and sets
        # HOME, USER and the groups from the password database, as a login would.
        argv = ["runuser", "-u", USER, "--", *argv]
    say(f"pass as {who}: pytest -m {shlex.quote(markers)}")
    return subprocess.run(argv, cwd=REPO, check=False).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markers", default="", help="a pytest -m expression both passes share")
    parser.add_argument("--label", default="", help="a name for the closing line (e.g. a release)")
    parser.add_argument("pytest_args", nargs="*")
    opts = parser.parse_args()
    python = Path(sys.executable)
    base = f"({opts.markers}) and " if opts.markers else ""
    with tempfile.TemporaryDirectory(prefix="wd-suite-") as tmp:
        os.chmod(tmp, 0o755)
        junits = (Path(tmp) / "user.xml", Path(tmp) / "root.xml")
        if os.geteuid() == 0:
            ensure_user()
            ensure_peer()
            make_reachable(python)
            precompile(python)
            allow_privileged(python)
            trust_checkout_in_git()
            register_in_accounting()
            # The user pass writes its report into this root-made folder.
            junits[0].touch()
            os.chown(junits[0], pwd.getpwnam(USER).pw_uid, -1)
            codes = [run_pass(python, base + "not root", True, opts.pytest_args, junits[0]),
                     run_pass(python, base + "root", False, opts.pytest_args, junits[1])]
        else:
            say("not root: one pass as this user, without the tests that need root")
            codes = [run_pass(python, base + "not root", False, opts.pytest_args, junits[0])]
        total = sum((tally(j) for j in junits), Tally())
        failed = [test for j in junits for test in failed_tests(j)]
    tally_file = os.environ.get("WATCHDOGS_SUITE_TALLY")
    if tally_file:  # the release matrix adds up its runs (slurm/dev-matrix)
        Path(tally_file).write_text(f"{total.passed} {total.failed} {total.skipped}\n")
    label = f"[{opts.label}]" if opts.label else ""
    for test in failed:
        print(f"suite{label}: FAILED {test}", flush=True)
    print(f"suite{label}: {total.passed} passed, {total.failed} failed, {total.skipped} skipped",
          flush=True)
    bad = [c for c in codes if c not in (0, NO_TESTS)]
    return bad[0] if bad else (0 if total.passed else 1)


if __name__ == "__main__":
    sys.exit(main())
