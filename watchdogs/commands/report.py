"""`watchdogs report [--out FILE]`: write the status page, one self-contained HTML file
(default: report.html in the state folder), from what the state database records."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from watchdogs.commands.base import CommandResult, config_from_args
from watchdogs.errors import WatchdogsError
from watchdogs.report.refresh import PAGE
from watchdogs.scheduler.changes import reader


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("report", help="write the status page: one HTML file with the trainings' "
                                           "timelines, disk and forecast, nodes, alerts")
    parser.add_argument("--out", "-o", type=Path, default=None,
                        help=f"where to write it (default: {PAGE} in the state folder)")
    parser.set_defaults(handler=report)


def report(args: argparse.Namespace) -> CommandResult:
    from watchdogs.report import data, html

    config = config_from_args(args)
    out = Path(args.out) if args.out else config.scheduler.state_dir / PAGE
    if not out.parent.is_dir():
        raise WatchdogsError(f"--out {out}: folder {out.parent} does not exist")
    # What status reads: the view the scheduler publishes (read-only, from any host), never
    # the database itself, which only the running scheduler writes (docs/state.md).
    store = reader(config.scheduler.state_dir)
    if store is None:
        raise WatchdogsError(f"nothing is recorded in {config.scheduler.state_dir} yet: the page is drawn "
                             "from what the scheduler recorded (`watchdogs start` or `watchdogs run --once`)")
    try:
        found = data.gather(config, store, time.time())
    finally:
        store.close()
    try:
        html.write(found, out)
    except OSError as exc:
        raise WatchdogsError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    word = "all fine" if found.fine else "needs attention"
    return CommandResult(f"wrote {out} ({word}): {found.headline}",
                         {"path": str(out), "fine": found.fine, "headline": found.headline})
