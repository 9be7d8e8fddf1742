"""How a signal asks the scheduler to stop: the handler only sets an attribute; the loop
looks at it at least every POLL_S and does the actual work (finish the item in progress,
persist, exit).

SIGUSR1 is the time-limit warning (`#SBATCH --signal=B:USR1@N`) or a successor asking to
take over (watchdogs.scheduler.handover): a planned handover, so running items get up to
HANDOVER_GRACE_S to finish. SIGTERM (scancel, preemption, node shutdown) leaves little time
before SIGKILL (Slurm's KillWait, often 30s), so they get TERM_GRACE_S; whatever is still
running then is killed and counts as not run. Any other signal that would end the process
(a `--signal` the script does not expect, an administrator's kill -HUP) is caught too, so the
instance still says what ended it (watchdogs.scheduler.lastword) and writes its end record.
"""
from __future__ import annotations

import signal
from types import FrameType
from typing import Literal

HANDOVER_GRACE_S = 60.0
TERM_GRACE_S = 3.0

Kind = Literal["handover", "terminate", "unexpected", "internal"]

# Keyed by int: the handler receives the plain signal number.
_GRACE: dict[int, float] = {signal.SIGUSR1: HANDOVER_GRACE_S, signal.SIGTERM: TERM_GRACE_S,
                             signal.SIGINT: TERM_GRACE_S}
_WHY: dict[int, str] = {signal.SIGUSR1: "handover (SIGUSR1: time limit near)",
                        signal.SIGTERM: "terminated (SIGTERM)", signal.SIGINT: "interrupted (SIGINT)"}
_KIND: dict[int, Kind] = {signal.SIGUSR1: "handover", signal.SIGTERM: "terminate", signal.SIGINT: "terminate"}
UNEXPECTED = tuple(getattr(signal, name) for name in
                   ("SIGUSR2", "SIGHUP", "SIGXCPU", "SIGXFSZ", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGQUIT")
                   if hasattr(signal, name))
"""Signals whose default action ends the process; SIGPIPE stays ignored (Python's default)."""


class StopFlag:
    def __init__(self) -> None:
        self.request: tuple[str, float] | None = None
        """(why, seconds running items may still take), or None while running."""
        self.kind: Kind | None = None
        """What asked: a handover, a termination (scancel, preemption), an unexpected signal,
        or the instance itself (the stop file, a corrupt database)."""

    def raise_(self, why: str, grace: float) -> None:
        if self.request is None:
            self.kind = "internal"
            self.request = (why, grace)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        # Two attribute writes, nothing else: the loop does the work (kind first: the loop
        # only looks at it once `request` is set).
        if self.request is None:
            self.kind = _KIND.get(signum, "unexpected")
            self.request = (_WHY.get(signum, f"ended by an unexpected signal {signal.Signals(signum).name}"),
                            _GRACE.get(signum, TERM_GRACE_S))

    def install(self) -> None:
        for signum in (*_GRACE, *UNEXPECTED):
            signal.signal(signum, self._handler)


def is_handover(reason: str) -> bool:
    return reason.startswith("handover")
