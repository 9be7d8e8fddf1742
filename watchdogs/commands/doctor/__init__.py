"""`watchdogs doctor`: will this work on my cluster? The config, the Slurm release, the
accounting database, the state folder (filesystem, locks, what that means for the
database), and whether every channel and the dead man's switch can be reached from here.
`--send` sends a test message through every channel; `--on-node` runs all of it (with
--send) in a small job on a compute node, where the scheduler runs, and reports that.

Nagios style: the first line is the verdict with the worst problem, perfdata after `|`;
exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. Every finding that is not OK names its fix.
"""
from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from watchdogs.commands.base import CommandResult
from watchdogs.commands.doctor.checks import Finding
from watchdogs.result import Status

if TYPE_CHECKING:
    from notifiers.base import Notifier
    from watchdogs.config import Config
    from watchdogs.slurmctl.runner import SlurmRunner

HELP = "will this work here? config, Slurm, accounting, state folder, every channel's reachability"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("doctor", help=HELP, description=HELP)
    parser.add_argument("--send", action="store_true",
                        help="also send a test message through every channel")
    parser.add_argument("--on-node", action="store_true",
                        help="run the checks (with --send) in a small job on a compute node and report them")
    parser.add_argument("--wait", type=float, default=300.0, metavar="SECONDS",
                        help="how long --on-node waits for its job (default 300)")
    parser.set_defaults(handler=doctor)


def doctor(args: argparse.Namespace) -> CommandResult:
    from watchdogs.slurmctl.runner import run_slurm

    started = time.monotonic()
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    if not args.on_node:
        findings = here(args.config, args.send, run_slurm)
        return report(findings, host, None, time.monotonic() - started)
    from watchdogs.commands.doctor.checks import check_config
    from watchdogs.commands.doctor.node import NodeAnswer, on_node

    config, checked = check_config(args.config)
    if config is None:
        return report([checked], host, None, time.monotonic() - started)
    answer = on_node(config.path.absolute(), config.scheduler.state_dir, args.wait, run_slurm)
    if isinstance(answer, NodeAnswer):
        return report(list(answer.findings), answer.host, answer.job, time.monotonic() - started)
    return report([checked, answer], host, None, time.monotonic() - started)


def here(config_arg: str | None, send: bool, runner: SlurmRunner) -> list[Finding]:
    """Every check, run on this host."""
    from watchdogs.alerts.channels import build_notifier
    from watchdogs.commands.doctor.checks import (
        check_accounting,
        check_config,
        check_shared_folders,
        check_slurm,
        check_state_dir,
    )
    from watchdogs.commands.doctor.reach import (
        channel_reach,
        channel_send,
        heartbeat_missing,
        heartbeat_reach,
    )
    from watchdogs.errors import WatchdogsError

    job = os.environ.get("SLURM_JOB_ID")
    config, checked = check_config(config_arg)
    slurm = check_slurm(runner)
    findings = [checked, slurm, check_accounting(runner, job)]
    if config is None:
        return findings
    if slurm.status != Status.CRITICAL:  # without Slurm's commands, `slurm` said it already
        from watchdogs.commands.doctor.cost import check_cost
        from watchdogs.scheduler.chain import default_script

        findings.append(check_cost(runner, default_script(), os.environ))
    from watchdogs.commands.doctor.homes import check_homes

    findings.append(check_homes())
    findings += check_state_dir(config.scheduler.state_dir)
    findings += check_shared_folders(config)
    for settings in config.notifiers:
        try:
            notifier = build_notifier(settings)
        except WatchdogsError as exc:  # a channel type whose package is missing (apprise)
            findings.append(Finding(f"channel {settings.name}", Status.CRITICAL, str(exc),
                                    "install what the channel type needs (see `watchdogs validate`)"))
            continue
        # The probe first even with --send: its failure names the way out (the proxy).
        reach = channel_reach(notifier, on_node=job is not None)
        findings.append(channel_send(notifier, _sender(config)) if send and reach.status == Status.OK
                        else reach)
        if not settings.enabled:
            last = findings[-1]
            findings[-1] = Finding(last.area, last.status, f"{last.summary} (disabled in the config)",
                                   last.fix, last.facts)
    scheduler = config.scheduler
    if scheduler.heartbeat_url:
        findings.append(heartbeat_reach(scheduler.heartbeat_url, scheduler.heartbeat_proxy, job is not None))
    else:
        findings.append(heartbeat_missing())
    return findings


def _sender(config: Config) -> Callable[[Notifier], None]:
    """How --send delivers: notify-test's message (kind "test"), rendered by the channel."""
    from notifiers.render import Templates
    from watchdogs.commands.channel_test import notify_test_batch

    cluster = config.alerts.cluster or os.environ.get("SLURM_CLUSTER_NAME") or socket.gethostname()

    def send(notifier: Notifier) -> None:
        batch = notify_test_batch(notifier.name, "warning", cluster)
        notifier.notify(notifier.render(batch, Templates(config.alerts.templates)))
    return send


def verdict(findings: Sequence[Finding]) -> Status:
    return max((f.status for f in findings), key=lambda s: s.severity, default=Status.UNKNOWN)


def report(findings: Sequence[Finding], host: str, job: str | None, seconds: float) -> CommandResult:
    status = verdict(findings)
    problems = sorted((f for f in findings if f.status != Status.OK), key=lambda f: -f.status.severity)
    counts = {s: sum(1 for f in findings if f.status == s) for s in Status}
    where = f"on {host}" + (f" (job {job})" if job else "")
    if problems:
        first = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        head = f"DOCTOR {status.name}: {first.area}: {first.summary}{more}"
    else:
        head = f"DOCTOR OK: {len(findings)} checks passed {where}"
    perf = (f"checks={len(findings)} critical={counts[Status.CRITICAL]} warning={counts[Status.WARNING]} "
            f"unknown={counts[Status.UNKNOWN]} seconds={seconds:.2f}s")
    width = max((len(f.area) for f in findings), default=0)
    lines = [f"{head} | {perf}", f"{where}, {seconds:.1f}s:"]
    for f in findings:
        lines.append(f"  {f.status.name:<8} {f.area:<{width}}  {f.summary}")
        if f.fix and f.status != Status.OK:
            lines.append(f"  {'':<8} {'':<{width}}  fix: {f.fix}")
    data = {"status": status.name, "exit_code": int(status), "host": host, "job": job,
            "seconds": round(seconds, 3), "findings": [f.as_dict() for f in findings]}
    return CommandResult("\n".join(lines), data, exit_code=int(status))
