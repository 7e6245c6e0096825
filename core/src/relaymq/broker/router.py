"""Routing: the last link of the interceptor chain puts a message on destinations.

Routing only *prepares*: each target queue or subscription assigns a sequence
number and adds the store operation to the send's `SendBatch`. The batch is then
written in one store call (one atomic unit: a send, a fan-out, or a whole local
transaction) and only after that do the messages become visible to consumers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any

from relaymq.broker.duplicates import DUPLICATE_ID, DUPLICATE_ID_MARKER, DuplicateDetector, IdCache
from relaymq.model.message import Message
from relaymq.spi.persistence import StoreOp

if TYPE_CHECKING:
    from relaymq.broker.region import Region
    from relaymq.dispatch.entry import QueueEntry
    from relaymq.dispatch.queue import Queue
    from relaymq.model.destination import Destination


class SendBatch:
    """The effects of one send (or one transaction): store operations, the
    entries that become visible when they are written, the duplicate ids
    recorded for it (forgotten again if the batch is abandoned), and change-feed
    events beyond the `MessageAdded` of `placed` (e.g. a transaction's acks)."""

    __slots__ = ("ops", "placed", "ids", "refusal", "events")

    def __init__(self) -> None:
        self.ops: list[StoreOp] = []
        self.placed: list[tuple[Queue, QueueEntry]] = []
        self.ids: list[tuple[IdCache, bytes, int]] | None = None
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

    __slots__ = ("connection", "batch", "in_transaction", "network", "notes", "origin")

    def __init__(self, connection: Any, batch: SendBatch, in_transaction: bool = False,
                 network: bool = False, notes: dict[str, Any] | None = None,
                 origin: str | None = None) -> None:
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


class Router:
    def __init__(self, region: Region) -> None:
        self.region = region
        self.duplicates = DuplicateDetector(region.policies, region.store_persistent)

    def route(self, ctx: SendContext, message: Message) -> Awaitable[None]:
        """Prepare `message` on its destinations. The common case (an existing
        queue or topic with room) finishes here and returns `DONE`; anything that
        may wait (creating a destination, flow control, fan-out to several
        destinations) returns the coroutine that does it."""
        dest = message.destination
        if dest is None:
            raise ValueError("a message needs a destination to be sent")
        dup = message.peek_property(DUPLICATE_ID, DUPLICATE_ID_MARKER)
        if dup is not None and not dest.is_composite and ctx.connection is not None \
                and self._duplicate(ctx, message, dest, dup):
            return DONE
        if not (dest.is_composite or dest.is_wildcard):
            region = self.region
            if dest.is_queue:
                queue = region.queues.get(dest)
                if queue is not None and not (queue.is_full() and not (
                        message.durable and region.store_persistent)):
                    queue.prepare(message, ctx.batch)
                    return DONE
            else:
                topic = region.topics.get(dest)
                if topic is not None:
                    topic.publish(message, ctx.batch)
                    return DONE
        return self._route(ctx, message, dest)

    def _duplicate(self, ctx: SendContext, message: Message, dest: Destination, dup: Any) -> bool:
        """True when `dup` was seen on `dest` before: the message is dropped (and a
        transaction holding it will fail). Otherwise the id is recorded in the batch.
        (Sends without a connection are the broker's own moves, e.g. to a DLQ: a
        message moved twice is not a duplicate.)"""
        batch = ctx.batch
        ids = batch.ids
        if ids is None:
            ids = batch.ids = []
        cache = self.duplicates.check(dest, dup, message.durable, batch.ops, ids)
        if cache is None:
            return False
        region = self.region
        target = region.queues.get(dest) if dest.is_queue else region.topics.get(dest)
        if target is not None:
            target.stats.duplicates += 1
        if ctx.in_transaction and batch.refusal is None:
            batch.refusal = (f"Duplicate message detected: {DUPLICATE_ID} "
                             f"{dup!r:.80} was already sent to {dest}; the transaction is "
                             f"rolled back")
        return True

    async def _route(self, ctx: SendContext, message: Message, dest: Destination) -> None:
        region = self.region
        if dest.is_composite:
            for part in dest.composite_parts():
                await self.route(ctx, message.copy(destination=part))
            return
        if dest.is_queue:
            if dest.is_wildcard:
                for q in region.matching_queues(dest):
                    await self._to_queue(ctx, q, message)
                return
            queue = region.queues.get(dest) or await region.queue(dest, origin=ctx.origin)
            await self._to_queue(ctx, queue, message)
            return
        if dest.is_wildcard:
            for t in region.matching_topics(dest):
                t.publish(message, ctx.batch)
            return
        topic = region.topics.get(dest) or await region.topic(dest, origin=ctx.origin)
        topic.publish(message, ctx.batch)

    async def _to_queue(self, ctx: SendContext, q: Queue, message: Message) -> None:
        if q.is_full() and not (message.durable and self.region.store_persistent):
            await self.region.flow_control(q.wait_for_space(), q.destination)
        q.prepare(message, ctx.batch)
