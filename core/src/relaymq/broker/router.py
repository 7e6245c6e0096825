"""Routing: the last link of the interceptor chain puts a message on destinations.

Routing only *prepares*: each target queue or subscription assigns a sequence
number and adds the store operation to the send's `SendBatch`. The batch is then
written in one store call (one atomic unit: a send, a fan-out, or a whole local
transaction) and only after that do the messages become visible to consumers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any

from relaymq.model.message import Message
from relaymq.spi.persistence import StoreOp

if TYPE_CHECKING:
    from relaymq.broker.region import Region
    from relaymq.dispatch.entry import QueueEntry
    from relaymq.dispatch.queue import Queue
    from relaymq.model.destination import Destination


class SendBatch:
    """The effects of one send (or one transaction): store operations, and the
    entries that become visible when they are written."""

    __slots__ = ("ops", "placed")

    def __init__(self) -> None:
        self.ops: list[StoreOp] = []
        self.placed: list[tuple[Queue, QueueEntry]] = []

    def abandon(self) -> None:
        for queue, entry in self.placed:
            queue.discard(entry)
        self.ops.clear()
        self.placed.clear()


class SendContext:
    """What filters know about a send: who sent it and where its effects collect.
    (A plain class: one is made per send, and a dataclass's generated __init__
    would run interpreted even where this module is compiled.)"""

    __slots__ = ("connection", "batch", "in_transaction", "network", "notes")

    def __init__(self, connection: Any, batch: SendBatch, in_transaction: bool = False,
                 network: bool = False, notes: dict[str, Any] | None = None) -> None:
        self.connection = connection  # ClientConnection; Any keeps filters free of the import
        self.batch = batch
        self.in_transaction = in_transaction
        #: True for messages that arrived over a broker connection (mirror, federation)
        self.network = network
        #: filters may leave notes for later filters (created on first use)
        self.notes = notes

    def __repr__(self) -> str:
        return (f"SendContext(connection={self.connection!r}, in_transaction={self.in_transaction},"
                f" network={self.network})")


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

    def route(self, ctx: SendContext, message: Message) -> Awaitable[None]:
        """Prepare `message` on its destinations. The common case (an existing
        queue or topic with room) finishes here and returns `DONE`; anything that
        may wait (creating a destination, flow control, fan-out to several
        destinations) returns the coroutine that does it."""
        dest = message.destination
        if dest is None:
            raise ValueError("a message needs a destination to be sent")
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
            queue = region.queues.get(dest) or await region.queue(dest)
            await self._to_queue(ctx, queue, message)
            return
        if dest.is_wildcard:
            for t in region.matching_topics(dest):
                t.publish(message, ctx.batch)
            return
        topic = region.topics.get(dest) or await region.topic(dest)
        topic.publish(message, ctx.batch)

    async def _to_queue(self, ctx: SendContext, q: Queue, message: Message) -> None:
        if q.is_full() and not (message.durable and self.region.store_persistent):
            await self.region.flow_control(q.wait_for_space(), q.destination)
        q.prepare(message, ctx.batch)
