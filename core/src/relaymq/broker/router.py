"""Routing: the last link of the interceptor chain puts a message on destinations.

Routing only *prepares*: each target queue or subscription assigns a sequence
number and adds the store operation to the send's `SendBatch`. The batch is then
written in one store call (one atomic unit: a send, a fan-out, or a whole local
transaction) and only after that do the messages become visible to consumers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relaymq.model.message import Message
from relaymq.spi.persistence import StoreOp

if TYPE_CHECKING:
    from relaymq.broker.region import Region
    from relaymq.dispatch.entry import QueueEntry
    from relaymq.dispatch.queue import Queue


@dataclass(slots=True)
class SendBatch:
    ops: list[StoreOp] = field(default_factory=list)
    placed: list[tuple[Queue, QueueEntry]] = field(default_factory=list)

    def abandon(self) -> None:
        for queue, entry in self.placed:
            queue.discard(entry)
        self.ops.clear()
        self.placed.clear()


@dataclass(slots=True)
class SendContext:
    """What filters know about a send: who sent it and where its effects collect."""

    connection: Any  # ClientConnection; Any keeps filters free of the import
    batch: SendBatch
    in_transaction: bool = False
    #: True for messages that arrived over a broker connection (mirror, federation)
    network: bool = False
    #: filters may leave notes for later filters (created on first use)
    notes: dict[str, Any] | None = None


class Router:
    def __init__(self, region: Region) -> None:
        self.region = region

    async def route(self, ctx: SendContext, message: Message) -> None:
        dest = message.destination
        if dest is None:
            raise ValueError("a message needs a destination to be sent")
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
            if queue.is_full() and not (message.durable and region.store_persistent):
                await region.flow_control(queue.wait_for_space(), dest)
            queue.prepare(message, ctx.batch)
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
