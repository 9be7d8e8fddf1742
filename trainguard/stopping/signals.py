"""Signals as a cooperative flag.

The handler only records which signal arrived and when (two attribute stores). No I/O,
no logging, no collective, no exit in the handler: Python runs handlers between two
bytecodes of the main thread, which may be inside a `torch.save` or an `all_reduce`; the
training loop reads the flag at its next poll point instead.
"""
from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

DEFAULT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGUSR1, signal.SIGTERM)
Clock = Callable[[], float]


def parse_signal(value: str | int | signal.Signals) -> signal.Signals:
    """"USR1", "SIGUSR1", 10 or signal.SIGUSR1 -> signal.SIGUSR1."""
    if isinstance(value, signal.Signals):
        return value
    if isinstance(value, int):
        return signal.Signals(value)
    name = value.strip().upper()
    name = name if name.startswith("SIG") else "SIG" + name
    try:
        return signal.Signals[name]
    except KeyError:
        raise ValueError(f"signal {value!r}: expected a signal name such as USR1, USR2 or TERM") from None


class SignalFlag:
    """Installs handlers for `signals`; `pending` is a bit mask of the signal numbers seen,
    `first_at` the clock time of the first one (None until then)."""

    def __init__(self, signals: Iterable[signal.Signals] = DEFAULT_SIGNALS,
                 clock: Clock = time.monotonic) -> None:
        self.signals = tuple(signals)
        self.pending = 0
        self.first_at: float | None = None
        self._clock = clock
        self._previous: dict[signal.Signals, Any] = {}

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        # Only flag stores here (see module docstring).
        if self.first_at is None:
            self.first_at = self._clock()
        self.pending |= 1 << signum

    def install(self) -> None:
        for sig in self.signals:
            if sig not in self._previous:
                self._previous[sig] = signal.signal(sig, self._handler)

    def reclaim(self) -> None:
        """Put this flag's handlers back after a framework replaced them (Lightning installs
        its own SIGTERM handler when `fit` starts): one owner per signal. `restore()` still
        puts back the handlers from before the first `install()`."""
        for sig in self.signals:
            previous = signal.signal(sig, self._handler)
            self._previous.setdefault(sig, previous)

    def restore(self) -> None:
        """Put back the handlers that were there before `install()`."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def owned(self) -> list[signal.Signals]:
        """The signals whose handler is still this flag's (another library may have
        replaced it since `install()`)."""
        return [s for s in self.signals if signal.getsignal(s) == self._handler]

    def received(self) -> list[signal.Signals]:
        return [s for s in signal.Signals if self.pending & (1 << s)]
