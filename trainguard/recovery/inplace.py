"""Restart inside the allocation: what the batch script templates do after a training step
ended (docs/recovery.md).

    python -m trainguard.recovery.inplace start --allocation NL --need K ...   # the first node set
    python -m trainguard.recovery.inplace after --rc RC ...                    # relaunch, requeue or exit
    python -m trainguard.recovery.inplace reap --job J --pid SRUN --exit-file F  # end a step left behind

`start` and `after` print `key=value` lines (action, code, use, exclude, restart, summary,
allocation, lost);
the templates read them with `while IFS='=' read -r k v`, never eval. What they say in words
goes to stderr, i.e. the job's log.

After a fault (a hang, or a rank that died, while the batch shell received no stop signal),
the ranks that neither reported the hang nor finished are suspects: their nodes are noted in
the run's record (`python -m trainguard.recovery`, its owner), and the training restarts in a
new job step on the allocation's other nodes, from the newest checkpoint, with no requeue.
When no healthy spare is left, or after `--max` in-place restarts, it falls back to a requeue
that excludes the suspects; a restart storm ends the chain with `trainguard.recovery.restarts`' code.
A node that failed (sbatch --no-kill keeps the job; `trainguard.recovery.nodefail`) is noted with
cause node_fail and left out of the next node set and the requeue whatever the policy.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from trainguard.causes import EXIT_EXCEPTION, EXIT_REQUEUE
from trainguard.heartbeat import Heartbeat, of_run, read_heartbeats
from trainguard.recovery import cli_args, hostlist, nodefail, restarts
from trainguard.recovery.inplace_io import (
    Recovery,
    ask,
    forget_step_heartbeats,
    newest_checkpoint,
    recovery_cli,
    say,
)
from trainguard.recovery.precheck import EXIT_PRECHECK
from trainguard.recovery.step_end import reap

# A trainguard code that is an answer, not a fault: done (0), an exception (1: the same code
# would raise again), no progress (3), cannot save (4), NaN loss (5), a storm (6), scancel (143).
ANSWERS = (0, 1, 3, 4, 5, 6, 143)
# Answers whatever happened to the nodes: done, no progress, cannot save, NaN loss, a storm.
FINAL = (0, 3, 4, 5, 6)


@dataclass(frozen=True)
class Failure:
    cause: str                   # trainguard.recovery.suspects' cause: "hang", "rank_died", "node_fail"
    nodes: tuple[str, ...]       # the nodes of the ranks that stopped (frozen or dead), or failed
    step: int                    # the lowest step those ranks reached
    details: tuple[str, ...] = ()  # node_fail: what Slurm said of each node
    at: float | None = None      # node_fail: when to note it (nodefail.noted_at)
    down: tuple[str, ...] = ()   # node_fail: nodes left out whatever the suspect policy


@dataclass(frozen=True)
class Decision:
    action: str                  # "relaunch" | "requeue" | "exit" | "" (not a fault: as before)
    code: int = 0
    use: str = ""
    exclude: str = ""
    restart: int = 0
    summary: str = ""
    allocation: str = ""         # the nodes the job still has (after a node failure: fewer)
    lost: str = ""               # the nodes the allocation lost (the requeue restores the count)

    def lines(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in (("action", self.action), ("code", self.code),
                       ("use", self.use), ("exclude", self.exclude), ("restart", self.restart),
                       ("summary", self.summary), ("allocation", self.allocation), ("lost", self.lost)))


def fault_cause(rc: int, why: str, signalled: bool) -> str | None:
    """"hang" or "rank_died" when the step ended by a fault; None for an answer (done, a
    requeue the batch shell was asked for, an exception...)."""
    if signalled:
        return None         # a time limit, a preemption, a scancel: the queue's business
    if rc == EXIT_PRECHECK:
        return "precheck"   # the failing rank recorded its node itself
    if rc == EXIT_REQUEUE:
        return "hang" if why.startswith("hung") else None
    # A rank killed by a signal (srun says 128 + the signal): a dead rank. A code below 128
    # is the training's own answer (a usage error, an import error): the same on any node,
    # a restart would only repeat it.
    return "rank_died" if rc > 128 and rc not in ANSWERS else None


def stopped_ranks(beats: Sequence[Heartbeat], job: str) -> Failure | None:
    """The ranks of `job` that neither reported a hang, nor stopped on their own (`stopping`:
    a peer that raised when the dead rank broke its collective), nor finished: frozen or dead."""
    mine = [b for b in beats if b.job_id == job]
    gone = [b for b in mine if b.phase not in ("hung", "done", "stopping")]
    if not gone:
        return None
    nodes = tuple(sorted({b.host for b in gone if b.host}))
    return Failure("", nodes, min(b.step for b in gone))


def died_under_an_exception(rc: int, signalled: bool, beats: Sequence[Heartbeat], job: str) -> bool:
    """Exit 1 (an exception) is the training's own answer, unless some rank of this run never
    said it stopped: killed outright (SIGKILL, the OOM killer), its peers raised when their
    collective broke, and one of them reported first. A bug raises on every rank instead."""
    return rc == EXIT_EXCEPTION and not signalled and stopped_ranks(beats, job) is not None


def hung(beats: Sequence[Heartbeat], job: str) -> bool:
    return any(b.job_id == job and b.phase == "hung" for b in beats)


@dataclass(frozen=True)
class Situation:
    run_dir: Path
    job: str
    allocation: str              # a Slurm host list: the whole allocation
    need: int                    # nodes the training uses
    job_nodes: int               # nodes the job asked for (the requeue's need)
    partition: str
    restart: int                 # in-place restarts so far
    limit: int                   # at most this many in place, then requeue


def decide(s: Situation, failure: Failure, checkpoint: int, recovery: Recovery) -> Decision:
    """Note the suspects, choose in place or requeue, record the restart (a storm ends it)."""
    run = ("--run-dir", str(s.run_dir), "--job", s.job)
    groups = zip(failure.nodes, failure.details, strict=True) if failure.details else \
        [(",".join(failure.nodes), "")] if failure.nodes else []
    for nodes, detail in groups:
        ask(recovery, ["note", *run, "--cause", failure.cause, "--nodes", nodes,
                        "--step", str(failure.step), *(("--detail", detail) if detail else ()),
                        *(("--at", f"{failure.at:.3f}") if failure.at is not None else ())])
    down = ("--down", ",".join(failure.down)) if failure.down else ()
    kind, use, exclude = "requeue", "", ""
    if s.restart < s.limit:
        _, plan, _ = ask(recovery, ["plan", *run, "--allocation", s.allocation, "--need", str(s.need),
                                     *down])
        say(f"in-place plan: {plan.get('why', 'no answer')}")
        if plan.get("enough") == "yes" and plan.get("use"):
            kind, use = "inplace", plan["use"]
    else:
        say(f"{s.restart} in-place restarts already (TRAINGUARD_INPLACE_MAX={s.limit}): requeueing")
    if kind == "requeue":
        _, ex, _ = ask(recovery, ["exclude", *run, "--partition", s.partition, "--need", str(s.job_nodes),
                                   *down])
        exclude = ex.get("exclude", "")
        say(f"requeue: {ex.get('why', 'no answer')}")
    code, told, raw = ask(recovery, ["restart", *run, "--kind", kind, "--cause", failure.cause,
                                      "--node", ",".join(failure.nodes), "--step", str(checkpoint)])
    summary = told.get("summary", "")
    if code == restarts.EXIT_STORM:
        for line in raw.splitlines():
            if line.startswith(("storm=", "history=")):
                say(line.split("=", 1)[1])
        return Decision("exit", code, summary=summary)
    if code != 0:
        _record_failed(code)
    if kind == "inplace":
        return Decision("relaunch", 0, use, "", s.restart + 1, summary)
    return Decision("requeue", EXIT_REQUEUE, "", exclude, s.restart, summary)


def _record_failed(code: int) -> None:
    # Only a storm (EXIT_STORM) ends the chain: a recovery helper that failed (a crash, a
    # full record folder) must never turn a restart into the end of the training.
    say(f"recording the restart failed (python -m trainguard.recovery restart exited {code}); "
        f"restarting anyway (the restart storm limit cannot count this one)")


def _after(args: argparse.Namespace) -> int:
    beats = Path(args.heartbeats) if args.heartbeats else None
    # This run's records only: an earlier run's `hung` or `stopping` would explain this end wrongly.
    seen = of_run(read_heartbeats(beats), args.job, restart=int(os.environ.get("SLURM_RESTART_COUNT") or 0),
                  inplace=args.restart) if beats else []
    allocation = hostlist.expand(args.allocation)
    # A failed node ends the step with any code (137 from srun, 1 from a peer whose collective
    # broke, 140 from its hang): ask Slurm, unless the code is an answer whatever the nodes did.
    asked = args.signalled == "0" and args.rc not in FINAL
    lost = nodefail.look(args.job, allocation) if asked else nodefail.Lost((), tuple(allocation), ())
    remaining = ",".join(lost.remaining)
    cause = "node_fail" if lost.nodes else fault_cause(args.rc, args.why, args.signalled == "1")
    if cause is None and args.rc not in (0, 143) and args.signalled == "0" and hung(seen, args.job):
        # A rank that ended for the hang broke a peer's collective, and that peer's code
        # (1, an exception) reached us first: still the hang.
        cause = "hang"
    if cause is None and died_under_an_exception(args.rc, args.signalled == "1", seen, args.job):
        cause = "rank_died"
    if cause is None or lost.ending:
        sys.stdout.write(Decision("", allocation=remaining).lines())
        return 0
    if lost.nodes:
        step, last = nodefail.when(seen, args.job, lost.nodes)
        at = nodefail.noted_at(Path(args.run_dir), args.job, lost.nodes, last)
        failure = Failure(cause, lost.nodes, step, lost.details, at, lost.nodes)
        say(f"the training step ended by a node failure (exit {args.rc}): " +
            "; ".join(f"{n} {d}" for n, d in zip(lost.nodes, lost.details, strict=True)) +
            f"; the job still has {remaining or 'no node'}")
    else:
        stopped = stopped_ranks(seen, args.job) if beats and cause != "precheck" else None
        failure = Failure(cause, stopped.nodes if stopped else (), stopped.step if stopped else -1)
        say(f"the training step ended by a fault ({cause}, exit {args.rc}); stopped rank(s) on "
            f"{','.join(failure.nodes) or 'no node named by a heartbeat'}")
    situation = Situation(Path(args.run_dir), args.job, args.allocation, args.need, args.job_nodes,
                          args.partition, args.restart, args.max)
    checkpoint = newest_checkpoint(Path(args.checkpoints) if args.checkpoints else None)
    decision = replace(decide(situation, failure, checkpoint, recovery_cli), allocation=remaining,
                       lost=",".join(lost.nodes))
    if decision.action == "relaunch":
        forget_step_heartbeats(beats, args.job)
    sys.stdout.write(decision.lines())
    return 0


def _start(args: argparse.Namespace) -> int:
    run = ("--run-dir", args.run_dir, "--job", args.job)
    _, plan, _ = ask(recovery_cli, ["plan", *run, "--allocation", args.allocation, "--need", str(args.need)])
    say(f"first node set: {plan.get('use', '') or 'the whole allocation'} ({plan.get('why', 'no answer')})")
    if plan.get("enough") == "yes" and plan.get("use"):
        decision = Decision("relaunch", use=plan["use"])
    elif plan.get("enough") == "no":
        decision = _start_short(args, run, [n for n in plan.get("exclude", "").split(",") if n])
    else:
        decision = Decision("")
    sys.stdout.write(decision.lines())
    return 0


def _start_short(args: argparse.Namespace, run: Sequence[str], suspects: list[str]) -> Decision:
    """Too few healthy nodes in this allocation: requeue without the suspects, counted as a
    restart (a loop of such requeues ends as a storm), when the partition can spare them;
    otherwise a requeue would be given them again: train here, suspects included."""
    _, ex, _ = ask(recovery_cli, ["exclude", *run, "--partition", args.partition,
                                   "--need", str(args.job_nodes)])
    say(f"requeue: {ex.get('why', 'no answer')}")
    if not ex.get("exclude"):
        nodes = hostlist.expand(args.allocation)
        use = [n for n in nodes if n not in suspects] + [n for n in nodes if n in suspects]
        say(f"training on {','.join(use[:args.need])} anyway: a requeue could only get the same nodes")
        return Decision("relaunch", use=",".join(use[:args.need]))
    checkpoint = newest_checkpoint(Path(args.checkpoints) if args.checkpoints else None)
    code, told, _ = ask(recovery_cli, ["restart", *run, "--kind", "requeue", "--cause", "suspects",
                                        "--node", ",".join(suspects), "--step", str(checkpoint)])
    if code == restarts.EXIT_STORM:
        return Decision("exit", code, summary=told.get("summary", ""))
    if code != 0:
        _record_failed(code)
    return Decision("requeue", EXIT_REQUEUE, exclude=ex["exclude"], summary=told.get("summary", ""))


def _reap(args: argparse.Namespace) -> int:
    reap(args.job, args.pid, Path(args.exit_file), args.grace, say)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainguard.recovery.inplace",
                                description=__doc__.split("\n")[0])
    sub = p.add_subparsers(required=True, metavar="command")
    start, after, reap = (sub.add_parser(n) for n in ("start", "after", "reap"))
    for s in (start, after):
        s.add_argument("--run-dir", required=True)
        s.add_argument("--job", required=True)
        s.add_argument("--allocation", required=True, help="$SLURM_JOB_NODELIST")
        s.add_argument("--need", type=cli_args.positive, required=True, help="nodes the training uses")
        s.add_argument("--job-nodes", type=cli_args.positive, required=True)
        s.add_argument("--partition", required=True)
        s.add_argument("--checkpoints", default="")
    after.add_argument("--rc", type=cli_args.exit_code, required=True)
    after.add_argument("--why", default="", help="the exit file's second line")
    after.add_argument("--signalled", choices=("0", "1"), default="0")
    after.add_argument("--restart", type=cli_args.count, default=0)
    after.add_argument("--max", type=cli_args.count, default=3)
    after.add_argument("--heartbeats", default="")
    reap.add_argument("--job", type=cli_args.job_id, required=True)
    reap.add_argument("--pid", type=cli_args.pid, required=True)
    reap.add_argument("--exit-file", required=True)
    reap.add_argument("--grace", type=cli_args.seconds, default=20.0)
    start.set_defaults(run=_start)
    after.set_defaults(run=_after)
    reap.set_defaults(run=_reap)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
