"""Routing: the last link of the interceptor chain puts a message on destinations.

Routing only *prepares*: each target queue or subscription assigns a sequence
number and adds the store operation to the send's `SendBatch`. The batch is then
written in one store call (one atomic unit: a send, a fan-out, or a whole local
transaction) and only after that do the messages become visible to consumers.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from relaymq.broker.duplicates import DUPLICATE_ID, DUPLICATE_ID_MARKER, DuplicateDetector
from relaymq.dispatch.batch import DONE, SendContext
from relaymq.model.message import Message

if TYPE_CHECKING:
    from relaymq.broker.region import Region
    from relaymq.dispatch.queue import Queue
    from relaymq.model.destination import Destination


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
        dup: Any = ctx.duplicate_id
        if dup is None:
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
        if not self.seen(dest, dup, message.durable, batch.ops, ids, ctx.connection):
            return False
        if ctx.in_transaction and batch.refusal is None:
            batch.refusal = (f"Duplicate message detected: {DUPLICATE_ID} "
                             f"{dup!r:.80} was already sent to {dest}; the transaction is "
                             f"rolled back")
        return True

    def seen(self, dest: Destination, dup: Any, durable: bool, ops: list[Any], ids: list[Any],
             connection: Any) -> bool:
        """Whether duplicate id `dup` was seen on `dest` before; a repeat is counted on
        the destination and on `connection` (when there is one), a new id recorded
        (its store ops in `ops`, what undoes it in `ids`)."""
        if self.duplicates.check(dest, dup, durable, ops, ids) is None:
            return False
        region = self.region
        target = region.queues.get(dest) if dest.is_queue else region.topics.get(dest)
        if target is not None:
            target.stats.duplicates += 1
        if connection is not None:
            connection.duplicates += 1
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
