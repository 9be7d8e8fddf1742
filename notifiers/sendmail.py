"""The `email` channel's other way out: hand the message to the host's `sendmail` program
(Postfix's, exim's, msmtp's or nullmailer's), the way Slurm's own mail and cron do it on a
node that has no SMTP listener but a relay configured by the site.

The program gets an argument list, never a shell line: `sendmail -i -f SENDER -- TO...`
(`-i`: a line with a lone dot is not the end; `--`: no recipient is read as an option).
Its exit status follows sysexits.h: the ones that say "this message or this setup is wrong"
are permanent, the rest (EX_TEMPFAIL, EX_UNAVAILABLE: the relay is down) are retried.
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from notifiers.base import TransportError

# sysexits.h: EX_USAGE, EX_DATAERR, EX_NOINPUT, EX_NOUSER, EX_NOHOST, EX_NOPERM, EX_CONFIG.
# Sending the same message again with the same setup gives the same answer.
PERMANENT_EXITS = frozenset({64, 65, 66, 67, 68, 77, 78})
EXIT_NAMES = {64: "EX_USAGE", 65: "EX_DATAERR", 66: "EX_NOINPUT", 67: "EX_NOUSER", 68: "EX_NOHOST",
              69: "EX_UNAVAILABLE", 70: "EX_SOFTWARE", 71: "EX_OSERR", 72: "EX_OSFILE", 73: "EX_CANTCREAT",
              74: "EX_IOERR", 75: "EX_TEMPFAIL", 76: "EX_PROTOCOL", 77: "EX_NOPERM", 78: "EX_CONFIG"}
STDERR_LIMIT = 400


def argv(program: Path, sender: str, recipients: Sequence[str]) -> list[str]:
    return [str(program), "-i", "-f", sender, "--", *recipients]


def program_problem(program: Path) -> str | None:
    """Why `program` cannot be run (None: it can), in words that say what to do."""
    if not program.is_absolute():
        return f"{program}: give the program's absolute path"
    if not program.exists():
        return (f"{program}: no such program (install the site's mailer, or point `sendmail` at "
                "msmtp's or Postfix's sendmail)")
    if not os.access(program, os.X_OK) or program.is_dir():
        return f"{program}: not an executable program"
    return None


def hand_over(program: Path, mail: bytes, sender: str, recipients: Sequence[str], timeout: float) -> None:
    """Give `mail` to `program`; raise TransportError with `permanent` set as sysexits says."""
    problem = program_problem(program)
    if problem is not None:
        raise TransportError(f"sendmail: {problem}", permanent=True)
    cmd = argv(program, sender, recipients)
    try:
        # stdout too is kept: some sendmails explain a refusal there, not on stderr.
        proc = subprocess.run(cmd, input=mail, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise TransportError(f"sendmail: {program} did not finish within {timeout:g}s") from None
    except OSError as exc:  # exec failed: ENOEXEC, EACCES, a missing interpreter
        raise TransportError(f"sendmail: cannot run {program}: {exc.strerror or exc}",
                             permanent=True) from None
    if proc.returncode == 0:
        return
    said = " ".join((proc.stderr or proc.stdout).decode("utf-8", "replace").split())[:STDERR_LIMIT]
    code = proc.returncode
    name = EXIT_NAMES.get(code, f"signal {-code}" if code < 0 else "")
    status = f"exit {code}" + (f" ({name})" if name else "")
    raise TransportError(f"sendmail: {program} failed, {status}: {said or 'no message'}",
                         permanent=code in PERMANENT_EXITS)
