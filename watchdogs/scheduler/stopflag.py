"""How a signal asks the scheduler to stop: the handler only sets an attribute; the loop
looks at it at least every POLL_S and does the actual work (finish the item in progress,
persist, exit).

SIGUSR1 is the time-limit warning (`#SBATCH --signal=B:USR1@N`): a planned handover, so
running items get up to HANDOVER_GRACE_S to finish. SIGTERM (scancel, preemption, node
shutdown) leaves little time before SIGKILL (Slurm's KillWait, often 30s), so they get
TERM_GRACE_S; whatever is still running then is killed and counts as not run.
"""
from __future__ import annotations

import signal
from types import FrameType

HANDOVER_GRACE_S = 60.0
TERM_GRACE_S = 3.0

# Keyed by int: the handler receives the plain signal number.
_GRACE: dict[int, float] = {signal.SIGUSR1: HANDOVER_GRACE_S, signal.SIGTERM: TERM_GRACE_S,
                             signal.SIGINT: TERM_GRACE_S}
_WHY: dict[int, str] = {signal.SIGUSR1: "handover (SIGUSR1: time limit near)",
                        signal.SIGTERM: "terminated (SIGTERM)", signal.SIGINT: "interrupted (SIGINT)"}


class StopFlag:
    def __init__(self) -> None:
        self.request: tuple[str, float] | None = None
        """(why, seconds running items may still take), or None while running."""

    def raise_(self, why: str, grace: float) -> None:
        if self.request is None:
            self.request = (why, grace)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        # A single attribute write, nothing else: the loop does the work.
        if self.request is None:
            self.request = (_WHY[signum], _GRACE[signum])

    def install(self) -> None:
        for signum in _GRACE:
            signal.signal(signum, self._handler)


def is_handover(reason: str) -> bool:
    return reason.startswith("handover")
