"""Queue entries and the pending list a queue dispatches from."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from relaymq.model.message import Message


class QueueEntry:
    """One message on one queue (or subscription) with its delivery state."""

    __slots__ = ("seq", "message", "delivery_count", "stored", "consumer", "delivery_id",
                 "removed", "releases", "unbound")

    def __init__(self, seq: int, message: Message, stored: bool = False) -> None:
        self.seq = seq
        self.message = message
        self.delivery_count = 0  # previous deliveries that did not end in an ack
        self.stored = stored  # written to the persistence adapter
        #: the `Consumer` that holds it while in flight (None while it waits)
        self.consumer: object | None = None
        self.delivery_id = 0
        self.removed = False
        self.releases = 0  # releases since the last counted delivery (maximumReleases)
        #: of `delivery_count`, the deliveries that ended because the broker unbound
        #: their consumer (a queue type's partition count change): they make the
        #: message redelivered, but were no failed delivery (`failures`)
        self.unbound = 0

    @property
    def failures(self) -> int:
        """Deliveries that failed: what a redelivery policy (or `maxRedelivery`) counts."""
        return self.delivery_count - self.unbound

    @property
    def priority(self) -> int:
        p = self.message.priority
        return 0 if p < 0 else 9 if p > 9 else p


class PendingList:
    """Messages waiting for a consumer, in dispatch order.

    FIFO by default; with `prioritized` one FIFO per priority, highest first.
    Entries that come back (released, redelivered, their consumer gone) return in
    sequence order ahead of newer messages. Removal from anywhere is O(1), which
    selectors, groups and expiry need.
    """

    __slots__ = ("_levels", "_prioritized", "count", "_bytes")

    def __init__(self, prioritized: bool = False) -> None:
        self._prioritized = prioritized
        self._levels: list[OrderedDict[int, QueueEntry]] = [
            OrderedDict() for _ in range(10 if prioritized else 1)
        ]
        self.count = 0  # entries waiting (what len() says, without a call)
        self._bytes = 0

    def _level(self, entry: QueueEntry) -> OrderedDict[int, QueueEntry]:
        return self._levels[entry.priority] if self._prioritized else self._levels[0]

    def append(self, entry: QueueEntry) -> None:
        if self._prioritized:
            self._levels[entry.priority][entry.seq] = entry
        else:
            self._levels[0][entry.seq] = entry
        self.count += 1
        self._bytes += entry.message.size

    def put_back(self, entry: QueueEntry) -> None:
        """Return an entry ahead of everything newer than it."""
        level = self._level(entry)
        level[entry.seq] = entry
        self.count += 1
        self._bytes += entry.message.size
        # Returned entries go to the front; callers return several in descending
        # sequence order so they end up in sequence order.
        level.move_to_end(entry.seq, last=False)

    def remove(self, entry: QueueEntry) -> bool:
        level = self._level(entry)
        if level.pop(entry.seq, None) is None:
            return False
        self.count -= 1
        self._bytes -= entry.message.size
        return True

    def get(self, seq: int) -> QueueEntry | None:
        """The waiting entry with sequence number `seq`, if any (O(1) per level)."""
        for level in self._levels:
            entry = level.get(seq)
            if entry is not None:
                return entry
        return None

    def popleft(self) -> QueueEntry | None:
        for level in reversed(self._levels):
            if level:
                _, entry = level.popitem(last=False)
                self.count -= 1
                self._bytes -= entry.message.size
                return entry
        return None

    def pop_ungrouped(self) -> QueueEntry | None:
        """Remove and return the head entry, unless it is empty or the head
        belongs to a message group (then it stays, and None is returned)."""
        for level in reversed(self._levels):
            if level:
                seq, entry = level.popitem(last=False)
                if entry.message.group_id is not None:
                    level[seq] = entry
                    level.move_to_end(seq, last=False)
                    return None
                self.count -= 1
                self._bytes -= entry.message.size
                return entry
        return None

    def peek(self) -> QueueEntry | None:
        for level in reversed(self._levels):
            if level:
                return next(iter(level.values()))
        return None

    def __iter__(self) -> Iterator[QueueEntry]:
        for level in reversed(self._levels):
            yield from list(level.values())

    def window(self, limit: int) -> list[QueueEntry]:
        out: list[QueueEntry] = []
        for level in reversed(self._levels):
            for entry in level.values():
                out.append(entry)
                if len(out) >= limit:
                    return out
        return out

    def __len__(self) -> int:
        return self.count

    @property
    def bytes(self) -> int:
        return self._bytes
