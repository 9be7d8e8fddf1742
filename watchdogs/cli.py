"""The `watchdogs` command: one error boundary turns WatchdogsError into a message and an
exit code; every subcommand returns a CommandResult that renders as text or --json.

Start-up is kept short: the command names and their help come from a static table
(watchdogs.commands.COMMANDS), and only the module of the command being run is imported."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from watchdogs.commands import COMMANDS

if TYPE_CHECKING:
    from watchdogs.commands.base import CommandResult

DESCRIPTION = """\
Watch a Slurm cluster and your jobs: built-in checks, cron.d drop-ins, alerts by email,
Slack, SMS or webhook, all run by one self-perpetuating Slurm job.

Start with `watchdogs validate`, then `watchdogs start`; `watchdogs status` shows what ran."""
EPILOG = "`watchdogs COMMAND -h` explains one command. Config: --config, $WATCHDOGS_CONFIG, ./watchdogs.toml."
_VALUED = ("--config", "-c")
"""Global options that take a value (skipped when looking for the command in argv)."""
_FLAGS = ("--json", "--verbose", "-v")


def help_width() -> int:
    """`shutil.get_terminal_size().columns - 2`, the width argparse wraps help to, without
    shutil: argparse makes a formatter for every argument it adds (to check its metavar),
    each one asks shutil, and importing shutil (with bz2, lzma and zlib) costs about 4 ms
    of every command, though only `-h` prints help. $COLUMNS, else stdout's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0 and sys.__stdout__ is not None:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):  # detached, closed or not a terminal
            columns = 0
    return (columns or 80) - 2


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         help_width() if width is None else width)


class _RawDescriptionFormatter(_Formatter, argparse.RawDescriptionHelpFormatter):
    """The command list's description keeps its line breaks."""


class _Parser(argparse.ArgumentParser):
    """The CLI's parsers, subcommands' included (argparse makes those of the parent's
    class), format help with _Formatter unless given another."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(**kwargs)


def _add_global_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """Global options work before and after the command (`watchdogs validate --config F`).
    On subcommands they default to SUPPRESS so they don't overwrite the value given before."""
    def d(value: object) -> object:
        return value if defaults else argparse.SUPPRESS
    parser.add_argument("--config", "-c", default=d(None),
                        help="config file (default: $WATCHDOGS_CONFIG, then ./watchdogs.toml)")
    parser.add_argument("--json", action="store_true", default=d(False), help="machine-readable output")
    parser.add_argument("--verbose", "-v", action="store_true", default=d(False), help="log more")


def command_in(argv: Sequence[str]) -> str | None:
    """The command named in `argv` (the first word that is not an option or its value)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--":
            continue
        elif word in _VALUED:
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def spelled_out_before(words: Sequence[str], command: str) -> bool:
    """Whether every word before `command` is a global option written in full (or the
    value of --config): argparse then runs `command` and cannot print the list of commands
    (no -h, no abbreviated option that takes the command as its value, no -vc cluster)."""
    value_next = False
    for word in words:
        if value_next:
            value_next = False
        elif word == command:
            return True
        elif word in _VALUED:
            value_next = True
        elif word not in _FLAGS and not word.startswith("--config=") and not (
                word.startswith("-c") and len(word) > 2):
            return False
    return False


def version_text() -> str:
    """`watchdogs 0.1.0 (trainguard 0.1.0)`: the installed distribution's version (its
    metadata), else the checkout's, and the trainguard that is imported, which a login node
    may have at another patch level. Looked up only when asked."""
    from importlib import metadata

    import trainguard
    from watchdogs import DISTRIBUTION

    try:
        mine = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        mine = trainguard.__version__
    return f"watchdogs {mine} (trainguard {trainguard.__version__})"


class _Version(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(version_text())  # stdout, as argparse's own version action
        parser.exit()


def build_parser(command: str | None = None, others: bool = True) -> argparse.ArgumentParser:
    """Every command is listed; only `command`'s module is imported to add its own options
    (the others are placeholders with their one-line help). `others=False` leaves the
    placeholders out: parse() does when argparse can only run `command`, since each
    placeholder is a whole parser (about 3 ms for the nine of them)."""
    parser = _Parser(prog="watchdogs", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=_RawDescriptionFormatter)
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the installed slurm-watchdogs and trainguard versions and exit")
    _add_global_options(parser, defaults=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    module = COMMANDS[command].module if command in COMMANDS else None
    for name, entry in COMMANDS.items():
        if entry.module != module and others:
            sub.add_parser(name, help=entry.help)
    if module is not None:
        importlib.import_module(f"watchdogs.commands.{module}").register(sub)
    for subparser in sub.choices.values():
        _add_global_options(subparser, defaults=False)
    return parser


def parse(argv: Sequence[str] | None = None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    words = list(sys.argv[1:] if argv is None else argv)
    command = command_in(words)
    others = command not in COMMANDS or not spelled_out_before(words, command)
    parser = build_parser(command, others)
    args = parser.parse_args(words)
    if args.command is not None and getattr(args, "handler", None) is None:
        # argv fooled command_in (an option it did not know takes a value): parse again
        # with the command argparse found.
        parser = build_parser(args.command)
        args = parser.parse_args(words)
    return parser, args


EXITS_FAST = frozenset({"status", "validate"})
"""Commands that leave nothing behind when they return (no thread, no open file, no atexit
duty but logging's): run as the program, they end the process without the interpreter's
finalisation."""


def main(argv: Sequence[str] | None = None) -> int:
    """`watchdogs ARGV`. Called without `argv`, as the `watchdogs` program and `python -m
    watchdogs` call it, a command of EXITS_FAST ends the process itself (`_exit_now`)."""
    parser, args = parse(argv)
    code = _answer(parser, args)
    if argv is None and args.command in EXITS_FAST:
        _exit_now(code)
    return code


def _answer(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the command parsed; its exit code (errors said on stderr, the result on stdout)."""
    if args.command is None:
        # No command: the list of commands, not argparse's "arguments are required".
        parser.print_help(sys.stderr)
        return 2
    # After parsing: `--help` and a usage error need none of these (errors brings dataclasses).
    import logging

    from watchdogs.errors import WatchdogsError

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        result = _run(args)
    except WatchdogsError as exc:
        print(f"watchdogs: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    output = result.render(args.json)
    if output:
        _print(output)
    return result.exit_code


def _run(args: argparse.Namespace) -> CommandResult:
    """The command; under --json whatever it prints meanwhile (a `console` channel set to
    stdout, a library's chatter) goes to stderr, so stdout is the JSON document alone."""
    if not args.json:
        return args.handler(args)
    import contextlib  # only here: `--help` stays light

    with contextlib.redirect_stdout(sys.stderr):
        return args.handler(args)


def _exit_now(code: int) -> NoReturn:
    """Tearing down the ~180 modules `status` imported takes about 8 ms, as long as all its
    work after the imports, and nobody sees it: flush what was written and leave. What is
    skipped: atexit handlers (logging's is run here) and the modules' garbage collection."""
    import contextlib
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # _print already handled a reader that went away
            stream.flush()
    os._exit(code)


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
