"""Duplicate detection: a message carrying `_AMQ_DUPL_ID` is accepted once per address.

As in Artemis, each address keeps the ids it has seen in a bounded cache (the
newest `idCacheSize`, policyEntry attribute, default 20000). A send whose id is
in the cache is acknowledged to its producer and dropped; inside a transaction
it marks the transaction to fail at commit. The id is recorded when the message
is routed, so a second copy arriving before the first is stored is caught too;
if the first one's batch is abandoned (the store refused it, the transaction
rolled back) its id is forgotten again.

Ids of durable messages on a persistent store are stored in the same batch as
the message (`AddDuplicateId`, and `RemoveDuplicateId` for the id the bounded
cache drops), so after a crash an id is known exactly when its message was
stored. Ids of non-persistent messages are kept in memory only: after a restart
the message is gone, and a resend of it is accepted again.

An id is compared by value and type: a string and a binary with the same bytes
are different ids. Other types are refused with `MessageFormatError`, as Artemis
refuses them (it reads the property as a string or a byte array only).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Final

from relaymq.dispatch.batch import IdRecord
from relaymq.dispatch.policy import PolicyMap
from relaymq.errors import MessageFormatError
from relaymq.model.destination import Destination
from relaymq.spi.persistence import (
    AddDuplicateId,
    DuplicateIdRecord,
    PersistenceAdapter,
    RemoveDuplicateId,
    StoreOp,
)

log = logging.getLogger("relaymq.duplicates")

#: the property (AMQP application property, STOMP header) that carries the id
DUPLICATE_ID: Final = "_AMQ_DUPL_ID"
#: how the name appears in a message's encoded bytes (lets routing skip parsing)
DUPLICATE_ID_MARKER = DUPLICATE_ID.encode()


def duplicate_key(value: Any) -> bytes:
    """The cache key of an id: its type tag and its bytes."""
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"b" + bytes(value)
    raise MessageFormatError(
        f"{DUPLICATE_ID} must be a string or a binary value, not {type(value).__name__} "
        f"({value!r:.60}); duplicate detection compares ids by value")


def describe_key(key: bytes) -> str:
    """An id for log lines."""
    if key[:1] == b"s":
        return repr(key[1:].decode("utf-8", "replace"))
    return "binary " + key[1:].hex()


class IdCache:
    """The ids one address has seen, oldest first. Values are the id's number:
    positive when it is stored, negative when it lives in memory only."""

    __slots__ = ("address", "size", "ids", "next_seq", "duplicates")

    def __init__(self, address: str, size: int) -> None:
        self.address = address
        self.size = max(size, 0)
        self.ids: OrderedDict[bytes, int] = OrderedDict()
        self.next_seq = 1
        self.duplicates = 0

    def __contains__(self, key: bytes) -> bool:
        return key in self.ids

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, key: bytes, stored: bool, ops: list[StoreOp]) -> int:
        """Record `key`; store ops for it (and for the ids it pushes out) go to `ops`."""
        seq = self.next_seq
        self.next_seq = seq + 1
        number = seq if stored else -seq
        self.ids[key] = number
        if stored:
            ops.append(AddDuplicateId(self.address, seq, key))
        self.trim(ops)
        return number

    def trim(self, ops: list[StoreOp]) -> None:
        """Drop the oldest ids over the cache size."""
        ids = self.ids
        while len(ids) > self.size:
            _, old = ids.popitem(last=False)
            if old > 0:
                ops.append(RemoveDuplicateId(self.address, old))

    def forget(self, key: bytes, number: int) -> None:
        """Undo `add` (its batch was abandoned); the store never saw the id."""
        if self.ids.get(key) == number:
            del self.ids[key]


class DuplicateDetector:
    """The id caches of every address, created on first use."""

    def __init__(self, policies: PolicyMap, store_persistent: bool) -> None:
        self.policies = policies
        self.store_persistent = store_persistent
        self.caches: dict[str, IdCache] = {}

    def cache(self, dest: Destination) -> IdCache:
        cache = self.caches.get(dest.key)
        if cache is None:
            size = self.policies.entry_for(dest).id_cache_size
            cache = self.caches[dest.key] = IdCache(dest.key, size)
        return cache

    def check(self, dest: Destination, value: Any, durable: bool, ops: list[StoreOp],
              undo: list[tuple[IdRecord, bytes, int]]) -> IdCache | None:
        """None when the id is new (it is recorded now, its store ops added to `ops`
        and how to take it back to `undo`); the address's cache when it is a
        duplicate (the caller drops the message and counts it)."""
        key = duplicate_key(value)
        cache = self.cache(dest)
        if key in cache.ids:
            cache.duplicates += 1
            if log.isEnabledFor(logging.DEBUG):
                log.debug("duplicate message dropped on %s: %s %s was seen before",
                          dest, DUPLICATE_ID, describe_key(key))
            return cache
        number = cache.add(key, durable and self.store_persistent, ops)
        undo.append((cache, key, number))
        return None

    async def recover(self, store: PersistenceAdapter) -> int:
        """Load the stored ids; ids over a (since lowered) cache size are dropped
        from the store at once. Returns how many ids were loaded."""
        records: list[DuplicateIdRecord] = await store.duplicate_ids()
        drop: list[StoreOp] = []
        for r in records:
            cache = self.cache(Destination.parse(r.address))
            cache.ids[r.dup_id] = r.seq
            if r.seq >= cache.next_seq:
                cache.next_seq = r.seq + 1
        for cache in self.caches.values():
            cache.trim(drop)
        if drop:
            await store.write(drop)
        return len(records) - len(drop)

    def statistics(self) -> dict[str, dict[str, int]]:
        """Per address: ids held, cache size and duplicates dropped."""
        return {key: {"ids": len(c), "id_cache_size": c.size, "duplicates": c.duplicates}
                for key, c in self.caches.items()}
