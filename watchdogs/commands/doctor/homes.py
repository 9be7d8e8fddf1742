"""The doctor's `homes` finding: where the scheduler can live for this user here. The
self-perpetuating job (the default), Slurm's `scrontab` (`scrontab -l` answers, or says it
is disabled), this login node's crontab, a systemd user timer (a user manager and linger).
Facts, so OK: which one to use is the user's choice, and `cost` says what each saves."""
from __future__ import annotations

from watchdogs.commands.doctor.checks import Finding
from watchdogs.result import Status
from watchdogs.scheduler import homes


def check_homes() -> Finding:
    found = [homes.detect(kind) for kind in homes.KINDS]
    works = [s.kind for s in found if s.works]
    summary = "; ".join(f"{s.kind}: {'yes' if s.works else 'no'} ({s.why})" for s in found)
    fix = "" if works == ["job"] else (
        "other homes bill per run, not around the clock: `watchdogs start --home "
        + "|".join(k for k in works if k != "job") + "`")
    return Finding("homes", Status.OK, f"works here: {', '.join(works)}. {summary}", fix,
                   {"homes": {s.kind: {"works": s.works, "why": s.why} for s in found}})
