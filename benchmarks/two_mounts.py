"""The two-host test as a measurement: one folder mounted twice with sshfs (two "hosts"),
the scheduler on one, `status`/`silence`/`ack` in a loop on the other, then `stop`.
Runs the code of this checkout, and with --old DIR also the code in DIR (e.g. a checkout
of main before the state design), one after the other on fresh mounts.

    sudo .venv/bin/python benchmarks/two_mounts.py --seconds 300 --old /tmp/main-before
"""
from __future__ import annotations

import argparse
import os
import pwd
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.state.sshfs import two_mounts
from tests.state.twomounts_load import Report, prepare, run


def once(label: str, seconds: float, user: str, pythonpath: str | None) -> Report:
    pw = pwd.getpwnam(user)
    base = Path(tempfile.mkdtemp(prefix=f"two-mounts-{label}-"))
    os.chmod(base, 0o755)
    home = base / "home"
    home.mkdir()
    os.chown(home, pw.pw_uid, pw.pw_gid)
    with two_mounts(base / "fs", (pw.pw_uid, pw.pw_gid)) as mounts:
        prepare(mounts.a)
        report = run(mounts.a, mounts.b, seconds, ["runuser", "-m", "-u", user, "--"], home, pythonpath,
                     mounts.export)
    print(f"{label}: {report.summary()}")
    for kind in ("errors", "queued", "lost", "corrupt", "scheduler_errors"):
        items = getattr(report, kind)
        for line in items[:5]:
            print(f"  {kind}: {str(line)[:400]}")
        if len(items) > 5:
            print(f"  {kind}: ... {len(items) - 5} more")
    shutil.rmtree(base, ignore_errors=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--user", default="wdtest")
    parser.add_argument("--old", help="a checkout with the code before the state design")
    args = parser.parse_args()
    if args.old:
        once("old", args.seconds, args.user, args.old)
    once("new", args.seconds, args.user, None)


if __name__ == "__main__":
    main()
