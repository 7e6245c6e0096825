"""``<mirroredQueue>``: every queue also publishes what it receives to a topic.

ActiveMQ's MirroredQueue lets anyone watch a queue's traffic without consuming
it: a message sent to queue ``Q`` is also published to topic
``prefix + Q + postfix`` (``VirtualTopic.Mirror.Q`` by default, so that with a
virtual topic in front, watchers can be queue consumers too).

The mirror copy continues down the interceptor chain after this filter, so a
``<virtualDestinationInterceptor>`` fans mirror topics out only when it is
listed *after* ``<mirroredQueue>``; `install` warns about the other order.
Temporary queues are not mirrored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from relaymq.model.destination import Destination
from relaymq.model.message import Message

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.broker.chain import Next
    from relaymq.dispatch.batch import SendContext

log = logging.getLogger("relaymq.virtual_topic")


class MirroredQueue:
    """The destination interceptor entry point ``mirroredQueue``."""

    @dataclass(slots=True)
    class Config:
        """Attributes of ``<mirroredQueue>`` (ActiveMQ's names and defaults)."""

        #: topic name = prefix + queue name + postfix
        prefix: str = "VirtualTopic.Mirror."
        postfix: str = ""
        #: accepted for compatibility: RelayMQ always sends the mirror a copy
        copy_message: bool = True

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()

    def install(self, broker: Broker) -> None:
        tags = [el.tag for el in broker.config.destination_interceptors]
        if ("virtualDestinationInterceptor" in tags and "mirroredQueue" in tags
                and tags.index("virtualDestinationInterceptor") < tags.index("mirroredQueue")):
            log.warning("<mirroredQueue> is listed after <virtualDestinationInterceptor>: mirror "
                        "topics (%s<queue>%s) are not virtual; list <mirroredQueue> first if "
                        "they should be", self.config.prefix, self.config.postfix)
        broker.add_filter(self.filter)
        log.info("mirrored queues: queue://<name> -> topic://%s<name>%s",
                 self.config.prefix, self.config.postfix)

    def mirror_of(self, queue: Destination) -> Destination:
        return Destination.topic(f"{self.config.prefix}{queue.name}{self.config.postfix}")

    async def filter(self, ctx: SendContext, message: Message, next: Next) -> None:
        dest = message.destination
        if dest is not None and dest.is_composite:
            for part in dest.composite_parts():
                await self.filter(ctx, message.copy(destination=part), next)
            return
        if dest is None or not dest.is_queue or dest.is_temporary or dest.is_wildcard:
            await next(ctx, message)
            return
        await next(ctx, message.copy(destination=self.mirror_of(dest)))
        await next(ctx, message)
