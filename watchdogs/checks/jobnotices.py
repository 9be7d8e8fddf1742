"""Job lifecycle notices for a `job` check that opts in (`notices = ["started", "requeued",
"ended"]`): for clusters where Slurm's own mail is off, a short note when the job starts
(node list, expected end), is requeued, or ends (why, and its efficiency).

Each notice is said once: the transitions are computed against what the check remembered
at its last look, and an `ended` notice whose explanation accounting has not recorded yet
waits for a later tick (up to ENDED_WAIT_S, then goes out with what is known)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from watchdogs import humanize
from watchdogs.result import Notice
from watchdogs.slurmctl.transitions import ENDED, REQUEUED, STARTED, Transition

if TYPE_CHECKING:
    # Annotations only: KINDS is in the `job` check's option table (`validate`, `status`).
    from watchdogs.slurmctl.ending import Ending
    from watchdogs.slurmctl.squeue import JobRow

KINDS = (STARTED, REQUEUED, ENDED)
ENDED_WAIT_S = 300.0
# Without a time limit Slurm shows an end about a year ahead: that is no expected end.
NO_LIMIT_AFTER_S = 300 * 86400.0


def _who(row: JobRow | None, job_id: str, name: str) -> str:
    label = row.name if row is not None else name
    return f"{label} (job {job_id})" if label else f"job {job_id}"


def started(t: Transition, now: datetime) -> Notice:
    row = t.row
    assert row is not None  # a start is always seen on a row of this look
    text = f"{_who(row, t.job_id, '')} started on {row.nodelist or '?'}"
    if row.start is not None:
        text += f" at {humanize.moment(row.start)}"
    if row.end is not None and 0 < (row.end - now).total_seconds() < NO_LIMIT_AFTER_S:
        text += f"; expected end {humanize.moment(row.end)} (its time limit)"
    return Notice(text, kind=STARTED)


def requeued(t: Transition, name: str, cause: str = "") -> Notice:
    """`cause`: how accounting recorded the run that was requeued (PREEMPTED...)."""
    row = t.row
    text = f"{_who(row, t.job_id, name)} {_requeue_words(cause)}"
    if t.ran_for:
        text += f" after running {humanize.duration(t.ran_for)}"
    if row is not None and row.queued and row.reason not in ("", "None"):
        text += f"; waiting again ({row.reason})"
    elif row is not None and row.running:
        text += f" and runs again on {row.nodelist}"
    return Notice(text, kind=REQUEUED)


def _requeue_words(cause: str) -> str:
    if cause == "PREEMPTED":
        return "was preempted and requeued"
    if cause == "NODE_FAIL":
        return "was requeued after a node failure (NODE_FAIL)"
    return f"was requeued (its run ended {cause})" if cause else "was requeued"


def ended(ending: Ending) -> Notice:
    return Notice(ending.sentence(), (f"efficiency: {ending.efficiency()}",), ENDED)


def notices(wanted: Sequence[str], found: Sequence[Transition], now: datetime, name: str,
            pending: Mapping[str, float], explain: Callable[[str, JobRow | None], tuple[Ending, bool]],
            causes: Mapping[str, str] | None = None) -> tuple[list[Notice], dict[str, float]]:
    """The notices of this look, and the `ended` ones still waiting for accounting
    (job ID -> when first seen ended). `explain(job_id, row)` gives (ending, final)."""
    out: list[Notice] = []
    waiting = dict(pending)
    for t in found:
        if t.kind == ENDED:
            waiting.setdefault(t.job_id, now.timestamp())
        elif t.kind in wanted:
            out.append(started(t, now) if t.kind == STARTED else
                       requeued(t, name, (causes or {}).get(t.job_id, "")))
    rows: dict[str, JobRow | None] = {t.job_id: t.row for t in found if t.kind == ENDED}
    for job_id, since in sorted(waiting.items(), key=lambda kv: kv[1]):
        if ENDED not in wanted:
            waiting.pop(job_id)
            continue
        ending, final = explain(job_id, rows.get(job_id))
        if final or now.timestamp() - since >= ENDED_WAIT_S:
            out.append(ended(ending))
            waiting.pop(job_id)
    return out, waiting

