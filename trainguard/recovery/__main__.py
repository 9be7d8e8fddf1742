"""`python -m trainguard.recovery`: the batch scripts' side of suspect nodes and restarts.

Every answer is `key=value` lines on stdout (the templates parse them, no eval); warnings go
to stderr. Exit codes: 0 go on; 6 (`restart`) a restart storm: end the chain on purpose;
2 bad arguments or settings (out of range: `usage:` and the reason; trainguard.recovery.cli_args);
1 the record could not be written (`note`). A byte that is not UTF-8 in an argument or the
record (a Latin-1 path in a hang detail) is written and shown as `\\xNN`, never a crash.

    note    --run-dir D --job J --cause C --nodes n1,n2 [--step S] [--detail TEXT]
    plan    --run-dir D --allocation HOSTLIST --need K [--job J]
    exclude --run-dir D --partition P --need K [--job J]
    restart --run-dir D --job J --kind {inplace,requeue,resubmit} --cause C [--node N] [--step S]
    show    --run-dir D
    dump    --run-dir D      (JSON, for the watchdog: entries, problems, excluded nodes, summary)

`note` and `restart` record the suspect and storm policy they ran with (the job's
TRAINGUARD_* settings) in each entry; `dump` judges by the record's newest policy, and so do
`note`/`restart` given `--policy-from-record` (the watchdog: its own environment is not the
job's). See trainguard.recovery.policy.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from trainguard import _files, _text
from trainguard.config import GuardConfig, config_from, storm_policy, suspect_policy
from trainguard.errors import SlurmError
from trainguard.recovery import cli_args, hostlist, journal, plan, policy, restarts, summary, suspects

SUMMARY_MAX = 2000   # characters of the summary= line (its node lists are host lists, bounded too)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        cfg = config_from(os.environ)
    except ValueError as exc:
        return _fail(2, f"bad trainguard setting: {exc}")
    return int(args.run(args, cfg))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainguard.recovery", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(required=True, metavar="command")
    job = os.environ.get("SLURM_JOB_ID", "")
    note = sub.add_parser("note", help="record suspect nodes")
    note.add_argument("--job", required=True)
    note.add_argument("--cause", required=True, choices=suspects.CAUSES)
    note.add_argument("--nodes", required=True, help="a Slurm host list")
    note.add_argument("--step", type=cli_args.step, default=-1)
    note.add_argument("--detail", default="")
    note.add_argument("--at", type=cli_args.epoch, default=None,
                      help="when it happened (epoch s; default: now)")
    note.set_defaults(run=_note)
    pl = sub.add_parser("plan", help="the allocation's nodes to restart on in place")
    pl.add_argument("--allocation", required=True, help="a Slurm host list ($SLURM_JOB_NODELIST)")
    pl.set_defaults(run=_plan)
    ex = sub.add_parser("exclude", help="the suspects to exclude from a requeue or resubmission")
    ex.add_argument("--partition", required=True)
    ex.set_defaults(run=_exclude)
    for s in (pl, ex):
        s.add_argument("--need", required=True, type=cli_args.positive, help="nodes the training needs")
        s.add_argument("--job", default=job)
        s.add_argument("--down", default="", help="failed nodes: left out whatever the policy")
    rs = sub.add_parser("restart", help="record a restart; exit 6 on a restart storm")
    rs.add_argument("--job", required=True)
    rs.add_argument("--kind", required=True, choices=restarts.KINDS)
    rs.add_argument("--cause", required=True)
    rs.add_argument("--node", default="")
    rs.add_argument("--step", type=cli_args.step, default=-1, help="the checkpoint step it resumes from")
    rs.add_argument("--excluded", default=None, help="the nodes excluded from the new start, when "
                    "not asked through `plan`/`exclude` (the watchdog's resubmit)")
    rs.set_defaults(run=_restart)
    show = sub.add_parser("show", help="the record in words")
    show.set_defaults(run=_show)
    dump = sub.add_parser("dump", help="the record as JSON (the watchdog reads it)")
    dump.set_defaults(run=_dump)
    for s in (note, pl, ex, rs, show, dump):
        s.add_argument("--run-dir", required=True, type=Path)
    for s in (note, rs):
        s.add_argument("--policy-from-record", action="store_true",
                       help="judge and record by the record's policy, not this environment's")
    return p


def _fail(code: int, message: str) -> int:
    print(f"trainguard.recovery: {_text.one_line(message)}", file=sys.stderr)
    return code


def _warn(message: str) -> None:
    _fail(0, f"warning: {message}")


def _out(lines: Sequence[str], limit: int = 0) -> None:
    # One value per line: a newline inside a value would forge a key for the template; a
    # byte that is not UTF-8 is shown as \xNN (print() of a lone surrogate would raise).
    for line in lines:
        print(_text.one_line(line, limit))


def _note(args: argparse.Namespace, cfg: GuardConfig) -> int:
    try:
        nodes = hostlist.expand(args.nodes)
        at = time.time() if args.at is None else args.at
        found = [suspects.Suspicion(n, args.cause, at, args.job, args.step, _text.from_os(args.detail))
                 for n in nodes]
    except ValueError as exc:
        return _fail(2, f"--nodes {args.nodes!r}: {exc}")
    rules = _policies(args, cfg)
    try:
        for s in found:
            suspects.record(args.run_dir, s, policy.to_fields(rules.suspect, rules.storm))
    except ValueError as exc:
        return _fail(2, str(exc))
    except OSError as exc:
        return _fail(1, f"cannot record in {journal.folder(args.run_dir)}: {exc}")
    _out([f"noted={','.join(nodes)}"])
    return 0


def _verdicts(args: argparse.Namespace, cfg: GuardConfig) -> list[suspects.Verdict]:
    found, problems = suspects.read(args.run_dir)
    for problem in problems:
        _warn(f"{problem} (left out)")
    return suspects.judge(found, time.time(), suspect_policy(cfg))


def _plan(args: argparse.Namespace, cfg: GuardConfig) -> int:
    try:
        allocation = hostlist.expand(args.allocation)
    except ValueError as exc:
        return _fail(2, f"--allocation {args.allocation!r}: {exc}")
    answer = plan.in_place(allocation, args.need, _verdicts(args, cfg), _down(args))
    _remember(args.run_dir, "plan", f"plan for job {args.job or '?'}: {answer.why}",
              {"job": args.job, "use": list(answer.use), "exclude": list(answer.exclude),
               "spares_left": answer.spares_left, "enough": answer.enough})
    _out(answer.lines())
    return 0


def _exclude(args: argparse.Namespace, cfg: GuardConfig) -> int:
    verdicts = _verdicts(args, cfg)
    if any(v.excluded for v in verdicts) or _down(args):
        try:
            answer = plan.for_partition(plan.partition_nodes(args.partition), args.need, verdicts,
                                        _down(args))
        except SlurmError as exc:
            answer = plan.Exclusion((), f"not excluding: cannot tell how many nodes the partition "
                                        f"has ({exc}), and excluding on doubt may leave too few")
    else:
        answer = plan.for_partition([], args.need, verdicts)
    _remember(args.run_dir, "exclude", f"exclusion for job {args.job or '?'}: {answer.why}",
              {"job": args.job, "exclude": list(answer.exclude)})
    _out(answer.lines())
    return 0


def _down(args: argparse.Namespace) -> list[str]:
    return [n for n in args.down.split(",") if n]


def _remember(run_dir: Path, kind: str, text: str, fields: dict[str, object]) -> None:
    try:
        journal.append(run_dir, kind, time.time(), text, fields)
    except OSError as exc:
        _warn(f"cannot record the {kind}: {exc}")


def _restart(args: argparse.Namespace, cfg: GuardConfig) -> int:
    now = time.time()
    try:
        restart = restarts.Restart(now, args.job, args.kind, _text.from_os(args.cause),
                                   _text.from_os(args.node), args.step)
    except ValueError as exc:
        return _fail(2, str(exc))
    found, _ = suspects.read(args.run_dir)
    text = summary.summarize(restart, summary.newest_suspicion(found, args.job, args.node),
                             _placement(args.run_dir, args.job, args.kind, args.excluded))
    history, problems = restarts.history(args.run_dir)
    rules = _policies(args, cfg)
    storm = restarts.storm([*history, restart], now, rules.storm)
    if storm is not None:
        text = f"{text}; {summary.storm_page(storm)}"
    fields = {"job": restart.job, "restart": restart.kind, "cause": restart.cause,
              "node": restart.node, "step": restart.step, "summary": text,
              "policy": policy.to_fields(rules.suspect, rules.storm)}
    try:
        journal.append(args.run_dir, "restart", now, restart.sentence(), fields)
        if storm is not None:
            journal.append(args.run_dir, "storm", now, summary.storm_page(storm),
                           {"job": restart.job, "reason": storm.reason, "history": storm.lines()})
        _write_summary(args.run_dir, text)
    except (OSError, ValueError) as exc:
        # A record that cannot be written is a warning, never an exit code: only a storm
        # (EXIT_STORM) may end the chain, and a helper's failure must not read as one.
        _warn(f"cannot record the restart: {exc}")
    for problem in problems:
        _warn(f"{problem} (left out)")
    _out([f"summary={text}"], SUMMARY_MAX)
    if storm is None:
        return 0
    _out([f"storm={storm.reason}", *(f"history={line}" for line in storm.lines())])
    return restarts.EXIT_STORM


def _policies(args: argparse.Namespace, cfg: GuardConfig) -> policy.Policies:
    """This environment's policy (the job's), or the record's for `--policy-from-record`."""
    if getattr(args, "policy_from_record", False):
        return policy.recorded([e.fields for e in journal.read(args.run_dir).entries])
    return policy.Policies(suspect_policy(cfg), storm_policy(cfg), "")


def _placement(run_dir: Path, job: str, kind: str, excluded: str | None) -> summary.Placement:
    """The newest `plan` (in place) or `exclude` (requeue, resubmit) answer for this job."""
    if excluded is not None:
        return summary.Placement(tuple(n for n in excluded.split(",") if n))
    wanted = "plan" if kind == "inplace" else "exclude"
    mine = [e for e in journal.read(run_dir).of(wanted) if str(e.fields.get("job", "")) == job]
    if not mine:
        return summary.Placement()
    f = mine[-1].fields
    spares = f.get("spares_left")
    return summary.Placement(tuple(map(str, f.get("exclude", ()))), tuple(map(str, f.get("use", ()))),
                             int(spares) if isinstance(spares, int) else None)


def _write_summary(run_dir: Path, text: str) -> None:
    target = journal.folder(run_dir) / summary.SUMMARY_FILE
    _files.make_dirs(target.parent, 0o755)
    _files.clean_stale(target)
    _files.write_atomic(target, _text.one_line(text) + "\n", 0o644)


def _show(args: argparse.Namespace, cfg: GuardConfig) -> int:
    j = journal.read(args.run_dir)
    _out([e.text for e in j.entries] or [f"no record in {journal.folder(args.run_dir)}"])
    for problem in j.problems:
        _out([f"warning: {problem} (left out)"])
    out = [v for v in _verdicts(args, cfg) if v.excluded]
    _out([f"excluded now: {v.why()}" for v in out] or ["excluded now: none"])
    return 0


def _dump(args: argparse.Namespace, cfg: GuardConfig) -> int:
    j = journal.read(args.run_dir)
    found, problems = suspects.read(args.run_dir)
    rules = policy.recorded([e.fields for e in j.entries])   # the job's, not the watchdog's
    verdicts = suspects.judge(found, time.time(), rules.suspect)
    try:
        last = _text.from_bytes((journal.folder(args.run_dir) / summary.SUMMARY_FILE).read_bytes()).strip()
    except OSError:
        last = ""
    print(json.dumps({"entries": [dict(e.fields) for e in j.entries], "problems": list(problems),
                      "excluded": [{"node": v.node, "why": v.why()} for v in verdicts if v.excluded],
                      "summary": last, "policy": policy.to_fields(rules.suspect, rules.storm),
                      "policy_source": rules.source if j.entries else ""}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
