"""The `watchdogs` command: one error boundary turns WatchdogsError into a message and an
exit code; every subcommand returns a CommandResult that renders as text or --json."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
from collections.abc import Sequence

import watchdogs.commands
from watchdogs import __version__
from watchdogs.errors import WatchdogsError

DESCRIPTION = """\
Watch a Slurm cluster and your jobs: built-in checks, cron.d drop-ins, alerts by email,
Slack, SMS or webhook, all run by one self-perpetuating Slurm job.

Start with `watchdogs validate`, then `watchdogs start`; `watchdogs status` shows what ran."""
EPILOG = "`watchdogs COMMAND -h` explains one command. Config: --config, $WATCHDOGS_CONFIG, ./watchdogs.toml."


def _add_global_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """Global options work before and after the command (`watchdogs validate --config F`).
    On subcommands they default to SUPPRESS so they don't overwrite the value given before."""
    def d(value: object) -> object:
        return value if defaults else argparse.SUPPRESS
    parser.add_argument("--config", "-c", default=d(None),
                        help="config file (default: $WATCHDOGS_CONFIG, then ./watchdogs.toml)")
    parser.add_argument("--json", action="store_true", default=d(False), help="machine-readable output")
    parser.add_argument("--verbose", "-v", action="store_true", default=d(False), help="log more")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="watchdogs", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_global_options(parser, defaults=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for info in sorted(pkgutil.iter_modules(watchdogs.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"watchdogs.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    for subparser in sub.choices.values():
        _add_global_options(subparser, defaults=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        # No command: the list of commands, not argparse's "arguments are required".
        parser.print_help(sys.stderr)
        return 2
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        result = args.handler(args)
    except WatchdogsError as exc:
        print(f"watchdogs: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    output = result.render(args.json)
    if output:
        _print(output)
    return result.exit_code


def _print(text: str) -> None:
    """`watchdogs status | head`: the reader went away; that is not an error."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the pipe again when it flushes stdout at exit: point stdout
        # at /dev/null first (the recipe in the `signal` module's documentation).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
