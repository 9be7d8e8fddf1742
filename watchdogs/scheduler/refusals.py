"""Drop-ins that will never run are told (issue 20 item 5): a WARNING once per refused file,
with the reason and the fix, and a resolution when it is fixed or removed. Before, a file
refused for its mode or owner, a dangling link or a loop showed only in `status`."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from watchdogs.alerts import selfalerts
from watchdogs.dropins.safety import Refusal
from watchdogs.sink import ItemOutcome


def refusal_outcomes(refused: Sequence[Refusal], before: Iterable[str], now: datetime
                     ) -> list[ItemOutcome]:
    """A WARNING for each refused drop-in (the alert lifecycle says it once: same reason, same
    fingerprint), and an OK for each one refused at the last look and not now."""
    paths = {r.path for r in refused}
    outcomes = [selfalerts.refused(r.path, r.reason, now) for r in refused]
    outcomes += [selfalerts.refusal_fixed(p, now) for p in sorted(set(before) - paths)]
    return outcomes
