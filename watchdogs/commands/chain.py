"""`watchdogs start` / `watchdogs stop`: begin or end the self-perpetuating scheduler job.

`stop` writes the stop file first (any instance that starts later exits at once without a
successor, and the running one stops at its next tick), then cancels the running
instance and its queued successor. `start` removes the stop file and submits the job
unless one is already queued or running, then waits (bounded) until that job's instance has
ticked once and says so, or why not (watchdogs.scheduler.firstbreath).
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path

from watchdogs.commands.base import CommandResult, config_from_args
from watchdogs.config import find_config_path
from watchdogs.errors import WatchdogsError
from watchdogs.ownfiles import make_dirs, write_atomic
from watchdogs.scheduler import chain, firstbreath, homes, startup
from watchdogs.scheduler.changes import reader
from watchdogs.scheduler.records import Records
from watchdogs.state.snapshot import VIEW_NAME
from watchdogs.state.store import DB_NAME, open_store


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    start_parser = sub.add_parser("start", help="submit the self-perpetuating scheduler job "
                                                "(removes the stop file)")
    start_parser.add_argument("--script", help="the batch script (default: $WATCHDOGS_CHAIN_SCRIPT, "
                                               "else slurm/cron-scheduler.slurm of this checkout)")
    start_parser.add_argument("--home", choices=homes.KINDS, default="job",
                              help="where the scheduler lives: job (the self-perpetuating Slurm job, the "
                                   "default), scrontab (Slurm's cron, where the site enables it), cron (this "
                                   "login node's crontab), timer (a systemd user timer); `doctor` says which "
                                   "work here. Starting one home stops the others")
    start_parser.add_argument("--wait", type=float, default=firstbreath.DEFAULT_WAIT_S, metavar="SECONDS",
                              help="how long to wait for the first instance's first tick (default "
                                   f"{firstbreath.DEFAULT_WAIT_S:g}); exit 0 once it ticked, 1 if still "
                                   "pending, 2 if it failed at start, 3 if Slurm could not be asked")
    start_parser.add_argument("--no-wait", action="store_true",
                              help="submit and return at once, without confirming the first tick")
    start_parser.set_defaults(handler=start)
    stop_parser = sub.add_parser("stop", help="end the scheduler job: stop file, then cancel the running "
                                              "instance and its queued successor")
    stop_parser.set_defaults(handler=stop)


def start(args: argparse.Namespace) -> CommandResult:
    config = config_from_args(args)  # a broken config is refused here, not in the queue
    settings = chain.lenient_settings(config.path)
    if not (settings.state_dir / VIEW_NAME).exists():  # else a scheduler owns the database: leave it
        open_store(settings.state_dir)[0].close()  # a state folder that cannot hold a database: say so now
    # Validated: the copy the chain falls back on, and where `stop` finds it if the file breaks.
    validated = startup.LoadedConfig(config, (), {}, config.path.read_bytes())
    startup.remember(config.path, settings.state_dir, validated)
    script = Path(args.script).expanduser().absolute() if args.script else chain.default_script()
    if not script.is_file():
        raise WatchdogsError(f"{script}: no such batch script (pass --script or set ${chain.SCRIPT_ENV})")
    lines: list[str] = []
    if args.home != "job":
        return _start_home(args.home, config.path.absolute(), settings, lines)
    lines += [f"removed the {kind} home (its entry is gone)" for kind in homes.KINDS[1:] if _removed(kind)]
    if settings.stop_file.exists():
        settings.stop_file.unlink()
        lines.append(f"removed the stop file {settings.stop_file}")
    jobs = chain.chain_jobs(settings.job_name)
    if jobs:
        live = ", ".join(f"{j.id} ({j.state})" for j in jobs)
        lines.append(f"{settings.job_name} is already queued or running: {live}; nothing submitted")
        return CommandResult("\n".join(lines), {"submitted": None, "jobs": [j.id for j in jobs]})
    job = chain.submit_instance(settings, script, None, 0.0, os.environ)
    lines.append(f"submitted {settings.job_name} as job {job} ({script}); its log: "
                 f"{settings.output_dir}/{settings.job_name}-{job}.out")
    others = [kind for kind in homes.KINDS[1:] if homes.detect(kind).works]
    if others:
        lines.append(f"other homes that work here, billed per run instead of around the clock: "
                     f"{', '.join(others)} (`watchdogs start --home {others[0]}`; `watchdogs doctor` "
                     "says what this job costs)")
    if args.no_wait or args.wait <= 0:
        return CommandResult("\n".join(lines), {"submitted": job, "jobs": [job]})
    breath = _first_breath(settings, job, args.wait)
    return CommandResult("\n".join([*lines, *breath.lines]), {"submitted": job, "jobs": [job],
                                                             "first_breath": breath.verdict},
                         exit_code=breath.exit_code)


def _first_breath(settings: chain.ChainSettings, job: str, wait: float) -> firstbreath.FirstBreath:
    print(f"waiting up to {wait:g}s for job {job}'s first tick (--no-wait skips this)...", file=sys.stderr,
          flush=True)
    return firstbreath.watch(job, firstbreath.Looker(settings), wait,
                             os.environ.get(chain.PYTHON_ENV, sys.executable))


def _removed(kind: str) -> bool:
    try:
        return homes.remove(kind)
    except OSError as exc:
        raise WatchdogsError(f"cannot remove the {kind} home: {exc}") from None


def _start_home(kind: str, config: Path, settings: chain.ChainSettings, lines: list[str]) -> CommandResult:
    """Install the cron-like home `kind`, then end the others: a chain's jobs are cancelled
    (no stop file: the new home must run), other homes' entries removed."""
    support = homes.detect(kind)
    if not support.works:
        raise WatchdogsError(f"the {kind} home does not work here: {support.why}; nothing was changed "
                             "(`watchdogs doctor` lists the homes that do)")
    line = homes.command(config, kind)
    try:
        if kind == "timer":
            homes.install_timer(line)
        else:
            make_dirs(settings.output_dir)
            scron = homes.scron_options(settings.job_name, settings.output_dir, os.environ) \
                if kind == "scrontab" else None
            homes.install_cron(kind, homes.block(kind, line, scron))
    except OSError as exc:
        raise WatchdogsError(f"cannot install the {kind} home: {exc}") from None
    if settings.stop_file.exists():
        settings.stop_file.unlink()
        lines.append(f"removed the stop file {settings.stop_file}")
    lines.append(f"installed the {kind} home: every minute, {line}")
    lines += [f"removed the {other} home" for other in homes.KINDS[1:] if other != kind and _removed(other)]
    jobs, error = chain.safe_chain_jobs(settings)
    if error:
        lines.append(f"cannot look for the chain's jobs ({error}): cancel them yourself (`squeue --me`)")
    elif jobs:
        chain.cancel([j.id for j in jobs])
        ended = ", ".join(f"{j.id} ({j.state})" for j in jobs)
        lines.append(f"cancelled the chain {settings.job_name}: {ended}")
    lines.append("items with a period under a minute run once a minute in this home; `watchdogs stop` "
                 "removes it")
    return CommandResult("\n".join(lines), {"home": kind, "line": line, "submitted": None,
                                            "jobs": [j.id for j in jobs]})


def stop(args: argparse.Namespace) -> CommandResult:
    # Lenient: `stop` must work even when the config is broken (that may be why you stop).
    settings = chain.lenient_settings(find_config_path(args.config))
    if settings.problem is not None and settings.source == "defaults":
        # Guessing the default job name and state folder would "stop" nothing and say so
        # proudly while the real chain runs on.
        raise WatchdogsError(
            f"{settings.problem}\ncannot tell which chain to stop: the config cannot be read and no last "
            f"good copy of it was found in {settings.state_dir}. Nothing was stopped. Fix the config, or "
            "stop the chain by hand: `squeue --me` shows its jobs (named by [scheduler] job_name, "
            "default watchdogs-cron); `scancel <job id>...` ends them; `touch <state_dir>/STOP` keeps "
            "new ones from starting")
    _write_stop_file(settings.stop_file)
    jobs, error = chain.safe_chain_jobs(settings)
    text = f"wrote the stop file {settings.stop_file}: instances starting from now on exit at once"
    gone = [kind for kind in homes.KINDS[1:] if _removed(kind)]
    if gone:
        text += f"\nremoved the {', '.join(gone)} home{'s' if len(gone) > 1 else ''}"
    if settings.problem is not None:
        text = f"{settings.problem}\nused the {settings.source} to find the chain\n{text}"
    if error:
        return CommandResult(f"{text}\ncannot cancel the queued/running instances: {error}",
                             {"stop_file": str(settings.stop_file), "cancelled": [], "error": error},
                             exit_code=3)
    jobs += _recorded_instance(settings, jobs)
    chain.cancel([j.id for j in jobs])
    done = ", ".join(f"{j.id} ({j.state})" for j in jobs) or "none was queued or running"
    return CommandResult(f"{text}\ncancelled {settings.job_name}: {done}",
                         {"stop_file": str(settings.stop_file), "cancelled": [j.id for j in jobs]})


def _recorded_instance(settings: chain.ChainSettings, found: list[chain.ChainJob]) -> list[chain.ChainJob]:
    """The instance the state directory records as running, if squeue still has it and it
    was not found by name (the job_name changed since it started): it must go too."""
    if not (settings.state_dir / DB_NAME).exists():
        return []
    try:
        view = reader(settings.state_dir)  # never the live database: its writer may be on another host
        latest = Records(view).latest_instance() if view is not None else None
        job_id = str(latest["job_id"]) if latest and latest["ended"] is None and latest["job_id"] else None
        job = chain.live_job(job_id) if job_id and job_id not in {j.id for j in found} else None
    except (WatchdogsError, sqlite3.Error):
        return []  # the record is a help here, not a requirement
    return [job] if job is not None else []


def _write_stop_file(path: Path) -> None:
    make_dirs(path.parent)
    write_atomic(path, (f"written by `watchdogs stop` (uid {os.getuid()}) at "
                        f"{time.strftime('%Y-%m-%d %H:%M:%S %z')}; `watchdogs start` removes it\n").encode())
