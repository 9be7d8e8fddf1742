"""Probes of issue 28 item 1, "never act on doubt": a training RUNS, an earlier run of its
name FAILED (so the resubmit policy would act), and the watchdog's look at the queue is odd.
Handled means: exactly one copy of the training is left, and the check said UNKNOWN."""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from probe_cases import BASE, ONCE, VALIDATE, Outcome, Probe


def _name(root: Path) -> str:
    # probes.py fills "{root}" into the config: the job name is the site's own.
    return f"wd-probe-doubt-{root}"


def _sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout


def _training(root: Path) -> None:
    """An earlier run that failed (recorded by accounting), then the training, running."""
    name = _name(root)
    failed = _sh("sbatch", "--parsable", f"--job-name={name}", "--output=/dev/null",
                 "--wrap", "exit 3").strip().split(";")[0]
    running = _sh("sbatch", "--parsable", f"--job-name={name}", "--output=/dev/null",
                  "--wrap", "sleep 300").strip().split(";")[0]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ended = "FAILED" in _sh("sacct", "-n", "-X", "-j", failed, "-o", "State")
        runs = "RUNNING" in _sh("squeue", "-h", "-j", running, "-o", "%T")
        if ended and runs:
            break
        time.sleep(0.5)
    (root / "train.slurm").write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nsleep 300\n")
    (root / "train.slurm").chmod(0o600)


def _wrapper(body: str):  # type: ignore[no-untyped-def]  # why: a setup closure, like probe_cases'
    def setup(root: Path) -> None:
        _training(root)
        real = _sh("which", "squeue").strip()
        (root / "bin").mkdir(exist_ok=True)
        (root / "bin" / "squeue").write_text(f"#!/bin/sh\nREAL={real}\n{body}\n")
        (root / "bin" / "squeue").chmod(0o700)
    return setup


def _config(**extra: str) -> str:
    keys = "".join(f'{k} = "{v}"\n' for k, v in extra.items())
    return (BASE + '[[check]]\nname = "train"\ntype = "job"\njob_name = "wd-probe-doubt-{root}"\n'
            'resubmit = "train.slurm"\nfail_fast = "0s"\n' + keys)


def _one_copy_and_unknown(root: Path, outs: Sequence[Outcome]) -> str | None:
    copies = _sh("squeue", "-h", f"--name={_name(root)}", "--states=PENDING,RUNNING", "-o", "%i").split()
    if len(copies) != 1:
        return f"{len(copies)} copies of the training"
    text = outs[0].out + outs[0].err
    if "UNKNOWN" not in text or "Resubmitted" in text:
        return "not UNKNOWN: " + text[:120]
    return None


def _cancel(root: Path) -> None:
    _sh("scancel", f"--name={_name(root)}")


def _validate_refuses(root: Path, outs: Sequence[Outcome]) -> str | None:
    out = outs[0]
    if out.code != 2 or "no such user 'nosuchuser'" not in out.out + out.err:
        return f"exit {out.code}: {(out.out + out.err)[:120]}"
    return None


PATH = ("PATH", "{root}/bin:" + os.environ.get("PATH", "/usr/bin:/bin"))


def _probes() -> list[Probe]:
    return [
        Probe("doubt", "squeue wrapper prints a warning line instead of the listing (exit 0)",
              _config(), ONCE, _one_copy_and_unknown,
              setup=_wrapper('echo "squeue: site notice: maintenance Sunday"\nexit 0'),
              cleanup=_cancel, needs_slurm=True, env=(PATH,), timeout=120),
        Probe("doubt", "squeue wrapper warns on stderr before the listing",
              _config(), ONCE, _one_copy_and_unknown,
              setup=_wrapper('echo "squeue: warning: partial answer" >&2\nexec "$REAL" "$@"'),
              cleanup=_cancel, needs_slurm=True, env=(PATH,), timeout=120),
        Probe("doubt", "users = \"nosuchuser\" (squeue: Invalid user, exit 0)",
              _config(users="nosuchuser"), ONCE, _one_copy_and_unknown,
              setup=_training, cleanup=_cancel, needs_slurm=True, timeout=120),
        Probe("doubt", "validate with users = \"nosuchuser\"", _config(users="nosuchuser"),
              VALIDATE, _validate_refuses),
    ]


PROBES: list[Probe] = _probes()
