"""The persistence contract: what a store plugin (memory, kahaDB, JDBC) implements.

A store sees the broker's changes as *batches* of operations. One `write()` call is
one atomic unit: a local transaction's sends and acks, a fan-out to many consumer
queues, or a single send. The returned awaitable completes when the batch is
durable under the store's sync policy; a persistent send is acknowledged to its
producer only then. Stores are free to merge batches from many producers into one
disk write and one sync (group commit).

Every message on a destination has that destination's sequence number, assigned by
the kernel, increasing and never reused, also across restarts (the store reports
the last one it has seen). Destinations are keyed by `Destination.key`
(`queue://NAME`); a durable topic subscription is stored like a queue under its
own key (`SubscriptionRecord.key`).

Duplicate detection (`_AMQ_DUPL_ID`) keeps, per address, the ids it has seen
(a bounded window of the newest). The kernel numbers them per address and puts
`AddDuplicateId` (and `RemoveDuplicateId` for the id the window drops) in the
same batch as the message that carried the id, so the message and its id are
stored or lost together; `duplicate_ids` gives them back after a restart. A JDBC
store keeps them as rows (address, seq, id) written in the batch's transaction.

Reads (`read`) serve recovery and paging: "the stored messages of this key with
sequence greater than `after`, at most `limit`, in sequence order". They never
consume anything.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Union

from relaymq.model.message import Message


# The operations made for every stored message (`AddMessage`, `RemoveMessage`,
# `AddDuplicateId`, `RemoveDuplicateId`) are not frozen dataclasses, only
# hashable and compared by value like the others: a frozen dataclass's
# `__init__` sets each field through `object.__setattr__` (three times as long,
# a few of them per message on every path that stores). Never change one after
# making it: a store may hold it until its batch is written.
@dataclass(slots=True, unsafe_hash=True)  # per message: not frozen (see AddMessage)
class AddMessage:
    """Store `message` under destination key `dest` at sequence `seq`."""

    dest: str
    seq: int
    message: Message


@dataclass(slots=True, unsafe_hash=True)  # per message: not frozen (see AddMessage)
class RemoveMessage:
    """The message at `seq` on `dest` was consumed (acknowledged) or moved away."""

    dest: str
    seq: int


@dataclass(frozen=True, slots=True)
class RemoveMessages:
    """The messages at `seqs` on `dest` were consumed: the same as one `RemoveMessage`
    per sequence, in one operation. The kernel hands a turn's acknowledgements of one
    destination over this way, and only to stores whose `removal_runs` is true."""

    dest: str
    seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AddDestination:
    """A destination was created (so it exists again after a restart)."""

    dest: str


@dataclass(frozen=True, slots=True)
class RemoveDestination:
    """A destination and all its stored messages are gone."""

    dest: str


@dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    """A durable topic subscription: identity, filter and where its messages live."""

    client_id: str
    name: str
    topic: str  # Destination.key of the topic (may be a wildcard)
    selector: str | None = None
    no_local: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return subscription_key(self.client_id, self.name)


def subscription_key(client_id: str, name: str) -> str:
    return f"durable://{client_id}:{name}"


@dataclass(frozen=True, slots=True)
class AddSubscription:
    record: SubscriptionRecord


@dataclass(frozen=True, slots=True)
class RemoveSubscription:
    """Unsubscribe: the record and every message stored under its key are gone."""

    key: str


@dataclass(slots=True, unsafe_hash=True)  # per message: not frozen (see AddMessage)
class AddDuplicateId:
    """Remember duplicate-detection id `dup_id` on `address` as its number `seq`.

    `dup_id` is the id's value tagged with its type (the kernel's
    `duplicate_key`); stores keep it as opaque bytes. `seq` increases per
    address and is never reused, so the oldest ids are the lowest numbers."""

    address: str
    seq: int
    dup_id: bytes


@dataclass(slots=True, unsafe_hash=True)  # per message: not frozen (see AddMessage)
class RemoveDuplicateId:
    """Forget the id stored as number `seq` on `address` (it left the id cache)."""

    address: str
    seq: int


@dataclass(frozen=True, slots=True)
class DuplicateIdRecord:
    """A stored duplicate-detection id, as `duplicate_ids` returns it."""

    address: str
    seq: int
    dup_id: bytes


StoreOp = Union[  # noqa: UP007 - a plain union reads best in docs
    AddMessage, RemoveMessage, RemoveMessages, AddDestination, RemoveDestination, AddSubscription,
    RemoveSubscription, AddDuplicateId, RemoveDuplicateId,
]


def removal_ops(runs: dict[str, list[int]], as_runs: bool) -> list[StoreOp]:
    """The store operations of removals given as sequence numbers per destination:
    one `RemoveMessages` per destination for a store that takes them (`as_runs`,
    its `removal_runs`), else one `RemoveMessage` per sequence number."""
    ops: list[StoreOp] = []
    if as_runs:
        for key, seqs in runs.items():
            ops.append(RemoveMessages(key, tuple(seqs)))
    else:
        for key, seqs in runs.items():
            for seq in seqs:
                ops.append(RemoveMessage(key, seq))
    return ops


@dataclass(slots=True)
class StoredMessage:
    seq: int
    message: Message


#: what `PersistenceAdapter.read_encoded` gives per message: (sequence number,
#: timestamp in epoch ms, its stored transport bytes or the decoded `Message`)
EncodedRecord = tuple[int, int, "bytes | Message"]


@dataclass(slots=True)
class DestinationStats:
    count: int = 0
    size: int = 0  # bytes on disk attributable to live messages (best effort)
    last_seq: int = 0


class StoreFullError(Exception):
    """The store reached its configured limit and refuses new messages."""


class LockState:
    """Where a store stands with its lock (`PersistenceAdapter.lock_state`): the
    lock that keeps two brokers from writing one store (kahaDB's lock file, a JDBC
    lease row). The broker stops serving when its store's lock is LOST."""

    NONE: Final = "none"  # the store takes no lock (memoryPersistenceAdapter)
    WAITING: Final = "waiting"  # another broker holds it; this one waits (a shared-store slave)
    HELD: Final = "held"
    LOST: Final = "lost"  # it was held and is not any more: another broker may own the data


#: called with (new state, a sentence saying why) when a store's lock state changes
LockListener = Callable[[str, str], None]


#: the longest destination key (``queue://NAME``, UTF-8 bytes) a store must hold:
#: kahaDB's journal writes a key's length as a u16. A store that holds less says so
#: in `PersistenceAdapter.max_key_length`, counted in its `max_key_unit`; the kernel
#: refuses longer names when it creates a destination or a durable subscription
#: (`Region.check_name`, `Region.check_key`), before anything is made. Every key is
#: held to MAX_KEY_BYTES as well, whatever the store.
MAX_KEY_BYTES: Final = 0xFFFF


class KeyUnit:
    """What a store's key limit counts (`PersistenceAdapter.max_key_unit`)."""

    #: bytes of UTF-8 (kahaDB's journal; a database column whose width is in bytes)
    BYTES: Final = "bytes"
    #: characters: Unicode code points, as Python's `len` counts them (a `VARCHAR(n)`
    #: column on PostgreSQL, whatever the script)
    CHARACTERS: Final = "characters"


def key_length(key: str, unit: str) -> int:
    """The length of `key` as `unit` (a `KeyUnit`) counts it."""
    if unit == KeyUnit.CHARACTERS:
        return len(key)
    return len(key.encode("utf-8", "surrogatepass"))


class PersistenceAdapter(abc.ABC):
    """A store driver. Implementations are entry points of `relaymq.persistence`,
    constructed with their typed config; the kernel calls `start` before anything else.
    """

    #: True when written data survives a restart (memory store: False).
    persistent: bool = True
    #: a `LockState`; stores that lock keep it current through `lock_changed`
    lock_state: str = LockState.NONE
    #: True when `write` takes `RemoveMessages`; the kernel then hands each turn's
    #: removals of one destination over as one operation instead of one object per
    #: acknowledgement (a store without it gets `RemoveMessage`s, as before)
    removal_runs: bool = False
    #: the longest destination or subscription key this store holds, counted in
    #: `max_key_unit` (the kernel holds every key to `MAX_KEY_BYTES` bytes too)
    max_key_length: int = MAX_KEY_BYTES
    #: what `max_key_length` counts: `KeyUnit.BYTES` (UTF-8) or `KeyUnit.CHARACTERS`.
    #: (A store that still sets the older `max_key_bytes` is held to that many bytes.)
    max_key_unit: str = KeyUnit.BYTES

    @abc.abstractmethod
    async def start(self) -> None:
        """Open files/connections and recover state; may take a lock."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Flush pending work and release everything (the lock included)."""

    @abc.abstractmethod
    async def write(self, ops: Sequence[StoreOp], *, sync: bool = True) -> None:
        """Apply `ops` atomically; return when durable. `sync=False` lets a store skip
        waiting for the disk (non-persistent spill, or a `never` sync policy)."""

    @abc.abstractmethod
    async def destinations(self) -> list[str]:
        """Keys of all stored destinations (not durable subscriptions)."""

    @abc.abstractmethod
    async def subscriptions(self) -> list[SubscriptionRecord]:
        """All durable subscriptions."""

    @abc.abstractmethod
    async def read(self, dest: str, after: int = 0, limit: int | None = None) -> list[StoredMessage]:
        """Stored messages of `dest` with seq > `after`, in seq order, at most `limit`."""

    async def read_encoded(self, dest: str, after: int = 0, limit: int | None = None,
                           encoding: str = "amqp") -> list[EncodedRecord]:
        """`read` for a reader that hands the messages on in a transport's
        encoding (the Spark source's sequence-range reads): ``(seq, timestamp,
        the stored bytes of `encoding`)`` for each message stored with such
        bytes, as they are, or ``(seq, timestamp, Message)`` for one that was
        not. A store that can find the bytes without building a `Message`
        (kahaDB) overrides this; the default reads through `read`."""
        out: list[EncodedRecord] = []
        for r in await self.read(dest, after, limit):
            m = r.message
            data = m.encoded
            out.append((r.seq, m.timestamp,
                        data if data is not None and m.encoding == encoding else m))
        return out

    @abc.abstractmethod
    async def duplicate_ids(self) -> list[DuplicateIdRecord]:
        """Every stored duplicate-detection id (`AddDuplicateId` not yet removed),
        ordered by address, then `seq`."""

    @abc.abstractmethod
    async def stats(self, dest: str) -> DestinationStats:
        """Count, size and the last sequence ever assigned on `dest` (0 when unknown)."""

    def size(self) -> int:
        """Bytes the store uses now (for `storeUsage`); 0 when unknown."""
        return 0

    def describe(self) -> str:
        """One line for logs: what the store is and where it keeps data."""
        return type(self).__name__

    # -- usage, reclaim, lock (database stores, shared-store HA) -------------------------
    async def current_size(self) -> int:
        """Bytes the store uses, asked of the store now (a database store may run a
        query). `size()` is the cheap figure the per-message path compares with
        `storeUsage`; a store whose size is expensive keeps `size()` a cached value
        and refreshes it here."""
        return self.size()

    async def reclaim(self) -> None:
        """Free space now (compaction, cleanup of acknowledged data): the broker calls
        it while producers wait for `storeUsage`. Default: nothing to do."""
        return None

    def usage_report(self, top: int = 5) -> str:
        """One line saying what holds the space (the largest destinations first),
        for the broker's store-full log line. Default: `describe()`."""
        return self.describe()

    def watch_lock(self, listener: LockListener) -> None:
        """Call `listener(state, why)` whenever `lock_state` changes (the broker
        watches for LOST)."""
        listeners: list[LockListener] | None = self.__dict__.get("_lock_listeners")
        if listeners is None:
            listeners = self.__dict__["_lock_listeners"] = []
        listeners.append(listener)

    def lock_changed(self, state: str, why: str = "") -> None:
        """Stores call this when their lock is waited for, taken or lost."""
        if state == self.lock_state:
            return
        self.lock_state = state
        for listener in list(self.__dict__.get("_lock_listeners", ())):
            listener(state, why)

    async def abandon(self) -> None:
        """Let go without writing anything more: the lock is lost and another broker
        may own the data now. Default: `stop()` (stores that flush or checkpoint on
        stop override this)."""
        await self.stop()
