"""A drop-in's output, capped: the first half of the cap goes to the run log as it comes,
the last half is kept in memory, and what was cut between them is marked. A drop-in that
prints in a loop (`yes`) cannot fill the state directory's disk."""
from __future__ import annotations

import collections
import threading
from typing import IO

from watchdogs.textsafe import from_bytes

DEFAULT_CAP = 1 << 20
CHUNK = 1 << 16


class CappedStream:
    """Drains `pipe` in a thread; `sink` (a file, or None for memory only) gets the head."""

    def __init__(self, pipe: IO[bytes], sink: IO[bytes] | None, cap: int = DEFAULT_CAP) -> None:
        self.pipe = pipe
        self.sink = sink
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.total = 0
        self.thread = threading.Thread(target=self._drain, daemon=True, name="dropin-output")
        self.thread.start()

    def _drain(self) -> None:
        while True:
            chunk = self.pipe.read1(CHUNK) if hasattr(self.pipe, "read1") else self.pipe.read(CHUNK)
            if not chunk:
                break
            self.total += len(chunk)
            room = self.head_cap - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                if self.sink is not None:
                    self.sink.write(chunk[:room])
                    self.sink.flush()
                chunk = chunk[room:]
            if chunk:
                self._keep_tail(chunk)
        self.pipe.close()

    def _keep_tail(self, chunk: bytes) -> None:
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        while self.tail_size - len(self.tail[0]) >= self.tail_cap:
            self.tail_size -= len(self.tail.popleft())

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    @property
    def cut(self) -> int:
        """Bytes dropped between head and tail."""
        return max(0, self.total - len(self.head) - min(self.tail_size, self.tail_cap))

    def rest(self) -> bytes:
        """What follows the head in the log: the cut marker (if any) and the tail."""
        tail = b"".join(self.tail)[-self.tail_cap:] if self.tail else b""
        if not self.cut:
            return tail
        marker = f"\n[... {self.cut} bytes cut: a run keeps its first and last {self.head_cap} bytes ...]\n"
        return marker.encode() + tail

    def text(self) -> str:
        """All that was kept, as text (head, marker, tail)."""
        return from_bytes(bytes(self.head) + self.rest())  # undecodable bytes shown as \xNN
