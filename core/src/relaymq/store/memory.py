"""`memoryPersistenceAdapter`: the built-in store that keeps nothing across restarts.

It implements the whole store contract (so the conformance suite runs against
it), and is what `persistent="false"` brokers use. Writes complete at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from relaymq.spi.persistence import (
    AddDestination,
    AddDuplicateId,
    AddMessage,
    AddSubscription,
    DestinationStats,
    DuplicateIdRecord,
    PersistenceAdapter,
    RemoveDestination,
    RemoveDuplicateId,
    RemoveMessage,
    RemoveSubscription,
    StoredMessage,
    StoreOp,
    SubscriptionRecord,
)


@dataclass(slots=True)
class MemoryConfig:
    """`<memoryPersistenceAdapter/>` takes no attributes that matter here."""

    create_tables_on_startup: bool = True  # accepted for ActiveMQ compatibility


class _Dest:
    __slots__ = ("messages", "last_seq", "size")

    def __init__(self) -> None:
        self.messages: dict[int, StoredMessage] = {}
        self.last_seq = 0
        self.size = 0


class MemoryPersistenceAdapter(PersistenceAdapter):
    Config = MemoryConfig
    persistent = False

    def __init__(self, config: MemoryConfig | None = None) -> None:
        self.config = config or MemoryConfig()
        self._dests: dict[str, _Dest] = {}
        self._declared: set[str] = set()
        self._subs: dict[str, SubscriptionRecord] = {}
        self._size = 0
        # Sequence numbers outlive a removed destination, so a re-created one
        # continues where it left off.
        self._last_seq: dict[str, int] = {}
        self._dup_ids: dict[str, dict[int, bytes]] = {}

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def _dest(self, key: str) -> _Dest:
        d = self._dests.get(key)
        if d is None:
            d = self._dests[key] = _Dest()
            d.last_seq = self._last_seq.get(key, 0)
        return d

    async def write(self, ops: Sequence[StoreOp], *, sync: bool = True) -> None:
        self.apply(ops)

    def apply(self, ops: Sequence[StoreOp]) -> None:
        """Apply a batch synchronously (the memory store never waits)."""
        for op in ops:
            if isinstance(op, AddMessage):
                d = self._dest(op.dest)
                d.messages[op.seq] = StoredMessage(op.seq, op.message)
                if op.seq > d.last_seq:
                    d.last_seq = op.seq
                n = op.message.size
                d.size += n
                self._size += n
            elif isinstance(op, RemoveMessage):
                held = self._dests.get(op.dest)
                if held is not None:
                    sm = held.messages.pop(op.seq, None)
                    if sm is not None:
                        n = sm.message.size
                        held.size -= n
                        self._size -= n
            elif isinstance(op, AddDestination):
                self._declared.add(op.dest)
                self._dest(op.dest)
            elif isinstance(op, RemoveDestination):
                self._declared.discard(op.dest)
                self._drop(op.dest)
            elif isinstance(op, AddSubscription):
                self._subs[op.record.key] = op.record
                self._dest(op.record.key)
            elif isinstance(op, RemoveSubscription):
                self._subs.pop(op.key, None)
                self._drop(op.key)
            elif isinstance(op, AddDuplicateId):
                self._dup_ids.setdefault(op.address, {})[op.seq] = op.dup_id
            elif isinstance(op, RemoveDuplicateId):
                ids = self._dup_ids.get(op.address)
                if ids is not None:
                    ids.pop(op.seq, None)
                    if not ids:
                        del self._dup_ids[op.address]
            else:  # pragma: no cover - a new op type must be handled explicitly
                raise TypeError(f"unknown store operation {op!r}")

    def _drop(self, key: str) -> None:
        d = self._dests.pop(key, None)
        if d is not None:
            self._size -= d.size
            self._last_seq[key] = max(d.last_seq, self._last_seq.get(key, 0))

    async def destinations(self) -> list[str]:
        keys = set(self._declared)
        keys.update(k for k, d in self._dests.items() if d.messages and k not in self._subs)
        return sorted(k for k in keys if not k.startswith("durable://"))

    async def subscriptions(self) -> list[SubscriptionRecord]:
        return list(self._subs.values())

    async def read(self, dest: str, after: int = 0, limit: int | None = None) -> list[StoredMessage]:
        d = self._dests.get(dest)
        if d is None:
            return []
        out = sorted((sm for seq, sm in d.messages.items() if seq > after), key=lambda s: s.seq)
        return out if limit is None else out[:limit]

    async def duplicate_ids(self) -> list[DuplicateIdRecord]:
        return [DuplicateIdRecord(address, seq, ids[seq])
                for address, ids in sorted(self._dup_ids.items()) for seq in sorted(ids)]

    async def stats(self, dest: str) -> DestinationStats:
        d = self._dests.get(dest)
        if d is None:
            return DestinationStats(last_seq=self._last_seq.get(dest, 0))
        return DestinationStats(count=len(d.messages), size=d.size, last_seq=d.last_seq)

    def size(self) -> int:
        return self._size

    def describe(self) -> str:
        return "memoryPersistenceAdapter (nothing survives a restart)"
