"""A queue browser's cursor: what the queue held when the browse began, in
sequence order, whether the messages were in memory or only in the store.

A queue keeps a window of its persistent messages in memory and leaves the rest
in the store (paged out, ActiveMQ's store cursor). Browsing only the memory
window hid the rest: after a restart the recovered messages filled the window
and every message sent later stayed in the store, unseen by a browser. The
cursor merges the memory snapshot with reads from the store, a page at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from relaymq.dispatch.entry import QueueEntry

if TYPE_CHECKING:
    from relaymq.spi.persistence import StoredMessage

#: messages read from the store at once for a browser
PAGE = 200


class BrowseCursor:
    """Memory snapshot (sequence order) merged with the store's messages in
    ``(after, upto]`` that the snapshot does not hold."""

    __slots__ = ("memory", "seen", "after", "upto", "buffer", "reading", "accept")

    def __init__(self, memory: list[QueueEntry], after: int, upto: int,
                 accept: Callable[[QueueEntry], bool]) -> None:
        memory.sort(key=lambda e: e.seq)
        self.seen = {e.seq for e in memory}
        memory.reverse()  # pop() from the end gives sequence order
        self.memory = memory
        self.after = after  # the store is read for seq > after ...
        self.upto = upto  # ... up to the queue's last seq when the browse began
        self.buffer: deque[QueueEntry] = deque()
        self.reading = False
        #: expiry and selector, for what comes from the store
        self.accept = accept

    def must_read(self) -> bool:
        """True when the store must be read (`add`) before the next entry is known."""
        memory = self.memory
        return not self.buffer and self.after < self.upto and (
            not memory or memory[-1].seq > self.after)

    def next(self) -> QueueEntry | None:
        """The next entry in sequence order (after `must_read` said no); None at the end."""
        memory, buffer = self.memory, self.buffer
        if buffer and (not memory or buffer[0].seq < memory[-1].seq):
            return buffer.popleft()
        return memory.pop() if memory else None

    def add(self, records: list[StoredMessage], limit: int) -> None:
        """Take a page the store returned for ``seq > after`` (at most `limit`)."""
        for rec in records:
            if rec.seq > self.upto:
                self.after = self.upto
                return
            self.after = rec.seq
            if rec.seq in self.seen:
                continue
            entry = QueueEntry(rec.seq, rec.message, True)
            if self.accept(entry):
                self.buffer.append(entry)
        if len(records) < limit:
            self.after = self.upto  # nothing more in the store
