"""Find the drop-ins under cron.d: cron.hourly/, cron.daily/, cron.weekly/ and crontab.

A scan is cheap (three folder listings and a stat per file), so the scheduler repeats it
every tick and picks up new, changed and removed drop-ins without a restart.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from watchdogs import units
from watchdogs.config.model import CronPeriods
from watchdogs.dropins.crontab import parse_crontab
from watchdogs.dropins.safety import Refusal, check_path, is_documentation, is_leftover, unsafe_reason
from watchdogs.schedules import Schedule, every
from watchdogs.textsafe import from_os

PERIODS = ("hourly", "daily", "weekly")
CRONTAB = "crontab"
HEADER_LINES = 20
_HEADER = re.compile(rb"#\s*watchdogs:\s*timeout\s*=\s*(\S+)")
_RUN_PARTS_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class DropIn:
    """One drop-in found in cron.d, safe to run: what to run, when, for how long."""

    id: str
    """"cron.hourly/check_gpu" or "crontab/<name>"."""
    kind: str
    """"dropin" (an executable in a period folder), "slurm" (a *.slurm file) or "crontab"."""
    argv: tuple[str, ...]
    schedule: Schedule
    timeout: float | None
    """Its own timeout (header line or crontab option); None means [scheduler] dropin_timeout."""
    submit: bool = False
    """True: submitted with sbatch instead of run here."""


@dataclass(frozen=True)
class Discovery:
    """A scan of cron.d: the drop-ins to run and the files refused (each with why)."""

    dropins: tuple[DropIn, ...]
    refused: tuple[Refusal, ...]


def discover(cron_dir: Path, periods: CronPeriods, uid: int | None = None) -> Discovery:
    uid = os.getuid() if uid is None else uid
    if not cron_dir.is_dir():
        return Discovery((), ())
    reason = check_path(cron_dir, uid)
    if reason:
        return Discovery((), (Refusal(str(cron_dir), f"folder {reason}; nothing under it runs"),))
    dropins: list[DropIn] = []
    refused: list[Refusal] = []
    for period in PERIODS:
        found, bad = _scan_folder(cron_dir / f"cron.{period}", every(getattr(periods, period)), uid)
        dropins += found
        refused += bad
    found, bad = _scan_crontab(cron_dir / CRONTAB, cron_dir, uid)
    return Discovery(tuple(dropins + found), tuple(refused + bad))


def _scan_folder(folder: Path, schedule: Schedule, uid: int) -> tuple[list[DropIn], list[Refusal]]:
    if not folder.is_dir():
        return [], []
    reason = check_path(folder, uid)
    if reason:
        return [], [Refusal(str(folder), f"folder {reason}; nothing in it runs")]
    dropins, refused = [], []
    for path in sorted(folder.iterdir()):
        if is_leftover(path.name) or is_documentation(path.name):
            continue
        try:
            st = path.stat()
        except OSError as exc:
            refused.append(Refusal(str(path), _stat_failure(path, exc)))
            continue
        slurm = path.suffix == ".slurm"
        if not stat.S_ISREG(st.st_mode):
            continue  # sub-folders are not drop-ins
        bad_name = name_problem(path.name)
        if bad_name:
            refused.append(Refusal(str(path), bad_name))
            continue
        # Whose it is comes first: "chmod u+x" is no advice for a file another user owns.
        reason = unsafe_reason(st, uid) or _link_reason(path, uid)
        if not reason and not (slurm or os.access(path, os.X_OK)):
            refused.append(Refusal(str(path), "not executable, so not run (chmod u+x to run it)"))
            continue
        try:
            timeout = _header_timeout(path)
        except ValueError as exc:
            reason = reason or f"header line: expected {exc}"
        if reason:
            refused.append(Refusal(str(path), reason))
            continue
        dropins.append(DropIn(f"{folder.name}/{path.name}", "slurm" if slurm else "dropin",
                              (str(path),), schedule, timeout, submit=slurm))
    return dropins, refused


def name_problem(name: str) -> str | None:
    """Why a file in a period folder is not run for its name, or None. cron's rule (Debian's
    run-parts without --lsbsysinit: "the names must consist entirely of ASCII upper- and
    lower-case letters, ASCII digits, ASCII underscores, and ASCII minus-hyphens"), plus our
    one ending, `.slurm`, for a script to submit. The name becomes the item's id, which
    reaches log lines, mail headers and terminals: a newline in it would forge a line."""
    stem = name.removesuffix(".slurm")
    if _RUN_PARTS_NAME.fullmatch(stem):
        return None
    undecodable = from_os(stem)
    if undecodable != stem:  # the OS's surrogateescape: bytes that are not UTF-8
        return (f"name is not UTF-8 text ({undecodable}), so not run; like cron's run-parts, a "
                "drop-in's name may hold only letters, digits, '_' and '-': rename it "
                "(`ls -b` shows the bytes)")
    if not stem:
        return "name not run: nothing before '.slurm'"
    odd = sorted({c for c in stem if not _RUN_PARTS_NAME.fullmatch(c)})
    shown = ", ".join(repr(c) for c in odd[:8]) + (" ..." if len(odd) > 8 else "")
    return (f"name not run: it holds {shown}; like cron's run-parts, a drop-in's name "
            "may hold only letters, digits, '_' and '-' (and end in '.slurm' to be submitted); rename it")


def _stat_failure(path: Path, exc: OSError) -> str:
    """Why a name in a drop-in folder cannot even be looked at."""
    if exc.errno == errno.ELOOP:
        return "symlink loop, so not run"
    if exc.errno == errno.ENOENT and path.is_symlink():
        return f"dangling symlink (to {os.readlink(path)}), so not run"
    return f"cannot stat ({exc.strerror}), so not run"


def _link_reason(path: Path, uid: int) -> str | None:
    """A symlink itself must be ours: its target is checked by the caller."""
    if not path.is_symlink():
        return None
    owner = path.lstat().st_uid
    return None if owner in (uid, 0) else f"symlink owned by uid {owner}, not by you or root"


def _scan_crontab(path: Path, cron_dir: Path, uid: int) -> tuple[list[DropIn], list[Refusal]]:
    if not path.is_file():
        return [], []
    reason = check_path(path, uid)
    if reason:
        return [], [Refusal(str(path), f"{reason}; none of its lines run")]
    try:
        # surrogateescape: a command path holding a byte that is not UTF-8 runs as it is
        # written; what is shown of it goes through the seam (Refusal, ItemOutcome).
        text = path.read_text(errors="surrogateescape")
    except OSError as exc:
        return [], [Refusal(str(path), f"cannot read: {exc.strerror}")]
    entries, refused = parse_crontab(text, cron_dir, label=str(path))
    dropins = []
    for entry in entries:
        command = Path(entry.argv[0])
        reason = check_path(command, uid)
        if reason is None and not os.access(command, os.X_OK) and command.suffix != ".slurm":
            reason = "not executable"
        if reason:
            refused.append(Refusal(f"{path}:{entry.line_no}", f"{command}: {reason}"))
            continue
        dropins.append(DropIn(f"crontab/{entry.name}", "crontab", entry.argv, entry.schedule,
                              entry.timeout, submit=command.suffix == ".slurm"))
    return dropins, refused


def _header_timeout(path: Path) -> float | None:
    """`# watchdogs: timeout=5m` in a script's first lines sets its own timeout (ValueError
    if the duration is bad)."""
    try:
        with path.open("rb") as fh:
            head = [fh.readline(512) for _ in range(HEADER_LINES)]
    except OSError:
        return None
    for line in head:
        match = _HEADER.search(line)
        if match:
            return units.parse_duration(match.group(1).decode(errors="replace"))
    return None
