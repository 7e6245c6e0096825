"""Virtual topic fan-out: one copy of a publication per existing consumer queue.

A consumer queue exists once a consumer has subscribed to it (or it was declared,
or recovered from the store), and keeps receiving while its consumers are away.
A consumer group that first subscribes later gets only later messages, exactly
as in ActiveMQ, because only existing queues are considered.

All copies of one publication go into the send's `SendBatch`, which the kernel
writes to the store as one atomic batch after the chain returns. That is what
ActiveMQ's ``transactedSend`` buys (all consumer queues or none, one sync) and
what ``concurrentSend`` aims at (the journal batching the writes), so both hold
for every fan-out here; ``concurrentSend`` additionally lets the copies wait
for memory (producer flow control) side by side instead of one after another.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from relaymq.errors import ResourceLimitExceeded
from relaymq.hookspecs import hookimpl
from relaymq.model.destination import Destination
from relaymq.model.message import Message, SelectorView

from relaymq_virtual_topic.model import VirtualTopic
from relaymq_virtual_topic.selectors import selector_provider

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.broker.chain import Next
    from relaymq.dispatch.batch import SendContext
    from relaymq.dispatch.queue import Queue

log = logging.getLogger("relaymq.virtual_topic")

#: The annotation that records where a forwarded copy was sent (ActiveMQ's
#: originalDestination); the same key the kernel's dead-letter copies use, so
#: transports render both the same way.
ORIGINAL_DESTINATION = "original_destination"

_INDEX_LIMIT = 10_000


def forwarded_copy(message: Message, target: Destination, record_origin: bool) -> Message:
    """`message` re-addressed to `target`, remembering where it was sent.

    Re-addressing keeps the transport's encoded form (transports render the
    destination themselves), but recording the origin drops it: annotations are
    part of what a transport encodes (STOMP's cached header block carries
    ``original-destination``), so the copy is encoded afresh at its edge.
    """
    if not record_origin or message.destination is None:
        return message.copy(destination=target)
    annotations = {**(message.annotations or {}), ORIGINAL_DESTINATION: message.destination.key}
    return message.copy(destination=target, annotations=annotations)


class ConsumerQueueIndex:
    """Which existing queues match a consumer-queue pattern, cached.

    Scanning every queue per publication would cost O(queues) per send; the
    answer only changes when a queue is created or deleted, which the
    ``relaymq_destination_added/removed`` hooks report.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._cache: dict[str, list[Destination]] = {}

    def queues(self, pattern: str) -> list[Queue]:
        """The existing queues matching the queue name `pattern` (wildcards allowed)."""
        names = self._cache.get(pattern)
        queues = self.broker.management.queues
        if names is None:
            if len(self._cache) >= _INDEX_LIMIT:
                self._cache.clear()
            wanted = Destination.queue(pattern)
            names = self._cache[pattern] = [
                d for d in queues if not d.is_temporary and wanted.matches(d)]
        return [q for d in names if (q := queues.get(d)) is not None]

    @hookimpl
    def relaymq_destination_added(self, destination: Destination) -> None:
        if destination.is_queue:
            self._cache.clear()

    @hookimpl
    def relaymq_destination_removed(self, destination: Destination) -> None:
        if destination.is_queue:
            self._cache.clear()


class Fanout:
    """Sends a topic publication's copies to the consumer queues of its virtual topics."""

    def __init__(self, broker: Broker, index: ConsumerQueueIndex) -> None:
        self.broker = broker
        self.index = index
        #: copies skipped because a consumer queue was full (dropOnResourceLimit)
        self.dropped = 0

    async def publish(self, ctx: SendContext, message: Message, topics: Sequence[VirtualTopic],
                      next: Next) -> None:
        """Forward copies of `message` (sent to a topic) to its consumer queues.

        Each consumer queue gets at most one copy even when several virtual
        topic entries cover it; the first entry (config order) decides options.
        The topic itself is not sent to here.
        """
        dest = message.destination
        assert dest is not None
        seen: set[Destination] = set()
        for vt in topics:
            if vt.local and ctx.network:
                continue  # came over a broker connection: its origin fanned it out
            copies = []
            for queue in self.index.queues(vt.consumer_queues(dest)):
                if queue.destination in seen:
                    continue
                seen.add(queue.destination)
                copy = forwarded_copy(message, queue.destination, vt.set_original_destination)
                if not vt.selector_aware or self._wanted(queue, copy):
                    copies.append(copy)
            if not copies:
                continue
            if vt.concurrent_send and len(copies) > 1:
                await self._concurrently(ctx, copies, vt, next)
            else:
                for copy in copies:
                    await self._send(ctx, copy, vt, next)

    def _wanted(self, queue: Queue, copy: Message) -> bool:
        """selectorAware: does an active consumer, or a remembered selector, match?"""
        view = SelectorView(copy)
        for consumer in queue.consumers:
            if consumer.closed:
                continue
            selector = consumer.selector
            if selector is None or selector.matches(view):
                return True
        provider = selector_provider(self.broker)
        if provider is not None:
            for selector in provider.selectors_for(queue.destination):
                if selector.matches(view):
                    return True
        return False

    async def _send(self, ctx: SendContext, copy: Message, vt: VirtualTopic, next: Next) -> None:
        try:
            await next(ctx, copy)
        except ResourceLimitExceeded as exc:
            if not vt.drop_on_resource_limit:
                raise
            self.dropped += 1
            log.debug("virtual topic %s: copy for %s dropped (dropOnResourceLimit): %s",
                      vt.name, copy.destination, exc)

    async def _concurrently(self, ctx: SendContext, copies: list[Message], vt: VirtualTopic,
                            next: Next) -> None:
        # Wait for every copy before raising, so no copy is still being added to
        # the batch after the send has failed.
        results: list[Any] = await asyncio.gather(
            *(self._send(ctx, c, vt, next) for c in copies), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
