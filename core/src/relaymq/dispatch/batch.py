"""What one send (or one local transaction) changes, collected before it is stored.

Routing fills a `SendBatch`: each target queue assigns a sequence number and adds
its store operation and entry. The store-write path (broker/writer.py) writes the
batch as one unit; only then do its entries become visible. `SendContext` is what
send filters know about a send. Both are used by the broker layer and by the
queues below it, so they live here, below both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from typing import Any, Protocol

from relaymq.dispatch.consumer import QueueBase
from relaymq.dispatch.entry import QueueEntry
from relaymq.spi.persistence import StoreOp


class IdRecord(Protocol):
    """Where a batch's duplicate ids were recorded (`broker.duplicates.IdCache`)."""

    def forget(self, key: bytes, number: int) -> None: ...


class SendBatch:
    """The effects of one send (or one transaction): store operations, the
    entries that become visible when they are written, the duplicate ids
    recorded for it (forgotten again if the batch is abandoned), and change-feed
    events beyond the `MessageAdded` of `placed` (e.g. a transaction's acks)."""

    __slots__ = ("ops", "placed", "ids", "refusal", "events")

    def __init__(self) -> None:
        self.ops: list[StoreOp] = []
        self.placed: list[tuple[QueueBase, QueueEntry]] = []
        self.ids: list[tuple[IdRecord, bytes, int]] | None = None
        #: why a transaction holding this batch must not commit (a duplicate inside it)
        self.refusal: str | None = None
        self.events: list[Any] | None = None

    def absorb(self, other: SendBatch) -> None:
        """Take over `other`'s effects (merged writes, a transaction's sends)."""
        self.ops.extend(other.ops)
        self.placed.extend(other.placed)
        if other.ids:
            if self.ids is None:
                self.ids = []
            self.ids.extend(other.ids)
        if other.refusal is not None and self.refusal is None:
            self.refusal = other.refusal
        if other.events:
            if self.events is None:
                self.events = []
            self.events.extend(other.events)

    def abandon(self) -> None:
        for queue, entry in self.placed:
            queue.discard(entry)
        ids = self.ids
        if ids:
            for cache, key, number in ids:
                cache.forget(key, number)
            ids.clear()
        self.ops.clear()
        self.placed.clear()
        self.events = None


class SendContext:
    """What filters know about a send: who sent it and where its effects collect.
    (A plain class: one is made per send, and a dataclass's generated __init__
    would run interpreted even where this module is compiled.)"""

    __slots__ = ("connection", "batch", "in_transaction", "network", "notes", "origin",
                 "duplicate_id")

    def __init__(self, connection: Any, batch: SendBatch, in_transaction: bool = False,
                 network: bool = False, notes: dict[str, Any] | None = None,
                 origin: str | None = None, duplicate_id: str | None = None) -> None:
        self.connection = connection  # ClientConnection; Any keeps filters free of the import
        self.batch = batch
        self.in_transaction = in_transaction
        #: True for messages that arrived over a broker connection (mirror, federation)
        self.network = network
        #: filters may leave notes for later filters (created on first use)
        self.notes = notes
        #: the broker id of the peer (mirror, federation) this send came from; None
        #: for local clients. Change-feed events of the send carry it.
        self.origin = origin
        #: the send's duplicate-detection id when the sender gives it apart from the
        #: message (a mirror target): checked instead of the `_AMQ_DUPL_ID` property
        self.duplicate_id = duplicate_id

    def __repr__(self) -> str:
        return (f"SendContext(connection={self.connection!r}, in_transaction={self.in_transaction},"
                f" network={self.network}, origin={self.origin!r})")


def _nothing() -> Generator[Any, Any, None]:
    return
    yield  # a generator that finishes at once


class _Done:
    """An awaitable that is already complete: what a send that needed no wait
    returns instead of a coroutine. Callers on the per-message path test
    ``is not DONE`` before awaiting (that skips a frame); awaiting it works too."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, Any, None]:
        return _nothing()


#: returned by `Router.route` (and so by the chain) when routing finished at once
DONE: Awaitable[None] = _Done()
