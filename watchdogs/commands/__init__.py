"""CLI subcommands: each module has `register(subparsers)` and handlers returning a
CommandResult.

COMMANDS names every command, the module that registers it and its one-line help, so
`watchdogs --help` and a command's own start-up import nothing but the module they need
(tests/foundation/test_cli_imports.py checks the table against every module's register())."""
# No `from __future__ import annotations` here: NamedTuple would compile each string
# annotation, and that first compile of the process (~3 ms) is all `--help` would compile.
from typing import NamedTuple


class Command(NamedTuple):
    module: str
    """The module in this package whose register() adds the command."""
    help: str


COMMANDS: dict[str, Command] = {
    "ack": Command("silence", "acknowledge open alerts: no reminders until their status changes"),
    "alerts": Command("alerts", "open alerts, undelivered messages and failing channels"),
    "doctor": Command("doctor", "will this work here? config, Slurm, accounting, state folder, "
                                "every channel's reachability"),
    "notify-test": Command("channel_test", "send a test message through one channel"),
    "run": Command("run", "run the scheduler: built-in checks and cron.d drop-ins"),
    "silence": Command("silence", "mute the alerts of a check or drop-in (or a glob) for a while"),
    "silences": Command("silence", "list running silences, or end one"),
    "start": Command("chain", "submit the self-perpetuating scheduler job (removes the stop file)"),
    "status": Command("status", "what ran, when, with what result, and what runs next"),
    "stop": Command("chain", "end the scheduler job: stop file, then cancel the running "
                             "instance and its queued successor"),
    "validate": Command("validate", "check the config file and report every problem"),
}
