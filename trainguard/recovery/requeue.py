"""One requeue for every path back into the queue: the batch script templates (requeue,
torchrun, the array's last task) and `self_requeue` (no template) all come here.

    python -m trainguard.recovery.requeue --job ID [--exclude node2,node3]

prints `requeued=yes|no`, `excluded=LIST` and `why=SENTENCE` lines (parse them with
`while IFS='=' read -r k v`; never eval).

Two things every caller needs and got wrong in a copy of its own:
- **No second requeue after a preemption.** Slurm 24.11 and later requeue a job preempted
  with PreemptMode=REQUEUE themselves when it ends within its GraceTime; a `scontrol requeue`
  on top leaves the preemption's requeue pending, and it requeues the NEXT run at its end too
  (one more run, held for BeginTime). 22.05 does not (it records the job COMPLETED). Releases
  in between were not checked, so they keep our requeue: at worst one extra run.
- **Exclusions that survive the requeue.** Slurm refuses `ExcNodeList` on a running job ("Job
  is no longer pending execution", 22.05 to 26.05); right after `scontrol requeue` the job is
  pending (while its old run still completes) and the update is accepted. The requeue also
  kills the batch script that asked for it, after KillWait: so SIGTERM is ignored here (the
  caller ignores it too), and the update is retried until the controller shows the list.
  A failed update never undoes the requeue: the run goes on without the exclusion, and says so,
  in the batch log and in the run's record (`--run-dir`, default $TRAINGUARD_RUN_DIR: an
  `exclusion_refused` entry, which the watchdog's `job` check tells).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainguard.errors import SlurmError
from trainguard.recovery import cli_args
from trainguard.slurm.run import Reply, run_slurm

Runner = Callable[[Sequence[str]], Reply]
# Slurm's own requeue of a preempted job exists from this release on (see above).
SLURM_REQUEUES_PREEMPTED_FROM = (24, 11)
# How long the exclusion is retried after the requeue: well inside the dev cluster's
# KillWait (5 s) is not enough on a busy controller, and Slurm's default KillWait is 30 s.
EXCLUDE_PATIENCE_S = 20.0
# Slurm's answers that no retry changes (a node name it does not know: retired from the config).
REFUSED_FOR_GOOD = ("Invalid node name",)
_VERSION = re.compile(r"(\d+)\.(\d+)")


@dataclass(frozen=True)
class Outcome:
    requeued: bool
    excluded: tuple[str, ...]
    why: str
    refused: str = ""          # why Slurm did not take the exclusion ("" when it did, or none asked)

    def lines(self) -> str:
        return (f"requeued={'yes' if self.requeued else 'no'}\nexcluded={','.join(self.excluded)}\n"
                f"why={self.why}\n")


def field(text: str, name: str) -> str:
    match = re.search(rf"(?:^|\s){name}=(\S*)", text)
    return match.group(1) if match else ""


def release(version_text: str) -> tuple[int, int] | None:
    """(major, minor) from `scontrol -V` ("slurm 24.11.5", "slurm-wlm 26.05.0")."""
    match = _VERSION.search(version_text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def slurm_requeues_preemption(job: str, partition: str, version: tuple[int, int] | None) -> bool:
    """Whether Slurm itself requeues this job when its run ends: preempted (PreemptTime set),
    by a partition with PreemptMode REQUEUE, on a release that does (see the module)."""
    preempted = field(job, "PreemptTime") not in ("", "None", "Unknown")
    mode = field(partition, "PreemptMode")
    return (preempted and "REQUEUE" in mode and version is not None
            and version >= SLURM_REQUEUES_PREEMPTED_FROM)


def _run(argv: Sequence[str]) -> Reply:
    return run_slurm(argv)


def preempted_and_requeued_by_slurm(job_id: str, run: Runner = _run) -> bool:
    """One `scontrol show job`, and only for a preempted job the partition and version."""
    try:
        job = run(["scontrol", "show", "job", "-o", job_id]).stdout
        if field(job, "PreemptTime") in ("", "None", "Unknown"):
            return False
        part = run(["scontrol", "show", "partition", "-o", field(job, "Partition")]).stdout
        version = release(run(["scontrol", "-V"]).stdout)
    except SlurmError:
        return False    # in doubt, our own requeue: at worst one run too many, never one lost
    return slurm_requeues_preemption(job, part, version)


def _ignore_term() -> None:
    # The requeue's SIGTERM to the job must not end us between the requeue and the update.
    with contextlib.suppress(ValueError):   # not the main thread: the caller ignores it
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def set_exclusion(job_id: str, nodes: Sequence[str], run: Runner = _run,
                  clock: Callable[[], float] = time.monotonic,
                  pause: Callable[[float], None] = time.sleep,
                  patience: float = EXCLUDE_PATIENCE_S) -> str:
    """Sets ExcNodeList on the pending job and reads it back; "" when done, else why not."""
    wanted = ",".join(nodes)
    until, last = clock() + patience, "no answer"
    while True:
        try:
            run(["scontrol", "update", f"JobId={job_id}", f"ExcNodeList={wanted}"])
            shown = field(run(["scontrol", "show", "job", "-o", job_id]).stdout, "ExcNodeList")
            if set(expand(shown, run)) >= set(expand(wanted, run)):
                return ""
            last = f"the controller shows ExcNodeList={shown or '(none)'}"
        except SlurmError as exc:
            last = str(exc)
            if any(word in last for word in REFUSED_FOR_GOOD):
                return last     # asking again cannot help, and KillWait is running out
        if clock() >= until:
            return last
        pause(0.2)


def expand(hostlist: str, run: Runner = _run) -> list[str]:
    """A Slurm host list (node[1-3]) as names, by Slurm itself."""
    if hostlist in ("", "(null)"):
        return []
    return run(["scontrol", "show", "hostnames", hostlist]).stdout.split()


def requeue(job_id: str, exclude: Sequence[str] = (), run: Runner = _run) -> Outcome:
    if preempted_and_requeued_by_slurm(job_id, run):
        return Outcome(False, (), "preempted: Slurm requeues the job itself when this run ends "
                                  "(a requeue of ours would requeue the next run too)")
    _ignore_term()
    try:
        run(["scontrol", "requeue", job_id])
    except SlurmError as exc:
        return Outcome(False, (), f"scontrol requeue {job_id} failed: {exc}")
    if not exclude:
        return Outcome(True, (), "requeued")
    failed = set_exclusion(job_id, exclude, run)
    if failed:
        return Outcome(True, (), f"requeued WITHOUT excluding {','.join(exclude)}: {failed}", failed)
    return Outcome(True, tuple(exclude), f"requeued, excluding {','.join(exclude)}")


def note_refusal(run_dir: Path | None, job_id: str, nodes: Sequence[str], refused: str) -> None:
    """The refused exclusion in the run's record, for the watchdog (the batch log alone is
    read by nobody at 3 am). A record that cannot be written is said on stderr."""
    if not refused or run_dir is None:
        return
    from trainguard.recovery import journal

    names = ",".join(nodes)
    try:
        journal.append(run_dir, "exclusion_refused", time.time(),
                       f"job {job_id}: the requeued run may land on {names} again: Slurm refused the "
                       f"exclusion ({refused})", {"job": job_id, "nodes": list(nodes), "reason": refused})
    except OSError as exc:
        print(f"trainguard.requeue: cannot note the refused exclusion in {run_dir}: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainguard.recovery.requeue",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--job", required=True, type=cli_args.job_id, help="the job id (SLURM_JOB_ID)")
    parser.add_argument("--exclude", default="", help="nodes to exclude, comma-separated")
    parser.add_argument("--pending", action="store_true",
                        help="no requeue: set the exclusion on this pending job (an array's next task)")
    parser.add_argument("--run-dir", type=Path, default=os.environ.get("TRAINGUARD_RUN_DIR") or None,
                        help="the run's record, where a refused exclusion is noted "
                             "(default: $TRAINGUARD_RUN_DIR)")
    args = parser.parse_args(argv)
    nodes = [n for n in args.exclude.split(",") if n]
    bad = [n for n in nodes if not re.fullmatch(r"[A-Za-z0-9._\[\]-]+", n)]
    if bad:
        parser.error(f"--exclude: {bad[0]!r} is not a node name")
    if args.pending:
        failed = set_exclusion(args.job, nodes) if nodes else ""
        outcome = Outcome(False, () if failed else tuple(nodes),
                          f"job {args.job}: " + (f"NOT excluding {args.exclude}: {failed}" if failed
                                                 else f"excluding {args.exclude or 'nothing'}"), failed)
        note_refusal(args.run_dir, args.job, nodes, outcome.refused)
        sys.stdout.write(outcome.lines())
        return 1 if failed else 0
    outcome = requeue(args.job, nodes)
    note_refusal(args.run_dir, args.job, nodes, outcome.refused)
    sys.stdout.write(outcome.lines())
    return 0 if outcome.requeued or outcome.why.startswith("preempted") else 1


if __name__ == "__main__":
    sys.exit(main())
