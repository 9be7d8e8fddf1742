"""Reading a run's recovery record for the `job` check (watchdogs.checks.recovery): by
trainguard's own CLI (`python -m trainguard.recovery dump`) in a bounded child, and only
when the record changed since the last reading (one `newest` probe of its folder, the
fsprobe worker's fast start, otherwise: benchmarks/recovery_read.py)."""
from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdogs.fsprobe.bounded import FsError, probe, run_bounded

if TYPE_CHECKING:
    from watchdogs.checks.context import TickContext

READ_MEMORY = "check.job.recovery.read"
REREAD_S = 600.0             # a reading older than this is renewed even when no file changed


@dataclass(frozen=True)
class Record:
    entries: tuple[Mapping[str, Any], ...]
    problems: tuple[str, ...]
    excluded: tuple[tuple[str, str], ...]   # (node, why) the policy excludes now
    summary: str                             # the newest "what happened, what was done"
    error: str = ""                          # why it could not be read at all
    # The suspect and storm policy the job ran with (trainguard.recovery.policy's fields),
    # and why the defaults stand in for it ("" when the record names it).
    policy: Mapping[str, Any] | None = None
    policy_source: str = ""

    def refusal(self, job_id: str) -> Mapping[str, Any] | None:
        """The exclusion Slurm refused for this job's latest requeue, unless a requeue since."""
        for e in reversed(self.entries):
            if str(e.get("job", "")) != job_id:
                continue
            if e.get("kind") == "exclusion_refused":
                return e
            if e.get("kind") == "restart" and e.get("restart") == "requeue":
                # Recorded just before its requeue: newer than the refusal, it is a later
                # requeue whose exclusion held (else its own refusal would come after it).
                return None
        return None

    def storm(self, job_id: str) -> Mapping[str, Any] | None:
        """The storm that ended this job's chain, if its record says so."""
        return next((e for e in reversed(self.entries) if e.get("kind") == "storm"
                     and str(e.get("job", "")) == job_id), None)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainguard.recovery", *args]


def read(run_dir: Path, timeout: float) -> Record:
    try:
        data = json.loads(run_bounded(cli("dump", "--run-dir", str(run_dir)), timeout,
                                      f"recovery record in {run_dir}"))
        return Record(tuple(data["entries"]), tuple(data["problems"]),
                      tuple((str(x["node"]), str(x["why"])) for x in data["excluded"]),
                      str(data["summary"]), "", data.get("policy"), str(data.get("policy_source", "")))
    except FsError as exc:
        return Record((), (), (), "", str(exc))
    except (ValueError, KeyError, TypeError) as exc:
        return Record((), (), (), "", f"recovery record in {run_dir}: unreadable answer ({exc})")


def read_if_changed(name: str, timeout: float, ctx: TickContext, run_dir: Path,
                    found: bool = False) -> Record | None:
    """The record, read again only when its newest file changed (one `newest` probe, the
    fsprobe worker's fast start, instead of trainguard's CLI each tick) or the reading is
    REREAD_S old (which nodes the policy excludes changes with time alone). `name`: the
    check whose reading is kept. `found`: the folder was not named by the user but guessed
    (the heartbeats' parent): None when it has no recovery record."""
    import glob

    try:
        newest = probe("newest", {"pattern": f"{glob.escape(str(run_dir / 'recovery'))}/*"}, timeout,
                       f"recovery record in {run_dir}")
    except FsError as exc:
        return None if found else Record((), (), (), "", str(exc))
    if newest is None and found:
        return None
    key = [str(run_dir), *((newest["path"], newest["mtime"], newest["size"]) if newest else ())]
    kept = ctx.store.kv_get(READ_MEMORY, name, {})
    now = ctx.now.timestamp()
    if kept.get("key") == key and 0 <= now - float(kept.get("at", 0)) < REREAD_S:
        return _from_json(kept["record"])
    record = read(run_dir, timeout)
    if not record.error:
        ctx.store.kv_put(READ_MEMORY, name, {"key": key, "at": now, "record": _to_json(record)})
    return record


def _to_json(r: Record) -> dict[str, Any]:
    return {"entries": list(r.entries), "problems": list(r.problems), "excluded": list(r.excluded),
            "summary": r.summary, "policy": r.policy, "policy_source": r.policy_source}


def _from_json(d: Mapping[str, Any]) -> Record:
    return Record(tuple(d["entries"]), tuple(d["problems"]),
                  tuple((str(n), str(w)) for n, w in d["excluded"]), str(d["summary"]), "",
                  d.get("policy"), str(d.get("policy_source", "")))
