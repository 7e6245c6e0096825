"""Topic subscriptions on queues: Solace's topic-to-queue mapping.

A queue carries topic subscriptions (wildcards `*` and `>` as everywhere in
RelayMQ); every message published to a matching topic is also put on the queue,
in the same store batch as the publication (so a persistent publication is on
every subscribed queue or on none). The copy keeps the message id and records
the topic it was published to (`original_destination`, STOMP's
`original-destination` header).

A queue's subscriptions come from three places, all kept while the queue
exists: the `topicSubscriptions` of its `<policyEntry>`, the
`topicSubscriptions` of its `<queue>` declaration, and those added through
management (`QueueTypes.add_subscription`), which are stored with the queue's
declared settings (`topicSubscriptions`) and so survive a restart. Deleting the
queue removes them all. Advisory topics (`ActiveMQ.Advisory.>`) are never
mapped to queues.

The send filter costs one attribute test per message while no queue has a
subscription, and one dict lookup per topic publication after that.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any, Final

from relaymq.errors import DestinationError
from relaymq.model.destination import Destination
from relaymq.model.message import Message

if TYPE_CHECKING:
    from relaymq.broker.chain import Next
    from relaymq.dispatch.batch import SendContext

log = logging.getLogger("relaymq.queue_types")

#: the setting (management's queue settings) holding subscriptions added at run time
SETTING = "topicSubscriptions"
#: the annotation recording the topic a copy was published to (the kernel's name)
ORIGINAL_DESTINATION: Final = "original_destination"
ADVISORY: Final = "ActiveMQ.Advisory."


def parse_topics(text: str | Iterable[str] | None) -> list[Destination]:
    """Topics from a comma-separated attribute (or a list); `topic://` optional."""
    if text is None:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for item in items:
        name = str(item).strip()
        if not name:
            continue
        dest = Destination.parse(name) if "://" in name else Destination.topic(name)
        if not dest.is_topic or dest.is_temporary or dest.is_composite:
            raise DestinationError(f"{name!r}: a queue subscribes to topics (wildcards allowed)")
        out.append(dest)
    return out


class TopicSubscriptions:
    """Which queues subscribe to which topics, and the send filter that delivers."""

    def __init__(self) -> None:
        #: queue -> {topic: where the subscription comes from (policy, declaration, management)}
        self.by_queue: dict[Destination, dict[Destination, str]] = {}
        self._targets: dict[Destination, tuple[Destination, ...]] = {}
        #: the filter's one test while nothing subscribes
        self.active = False

    # -- the index --------------------------------------------------------------------
    def set(self, queue: Destination, topics: dict[Destination, str]) -> None:
        if topics:
            if self.by_queue.get(queue) != topics:
                self.by_queue[queue] = dict(topics)
                log.info("%s subscribes to %s", queue,
                         ", ".join(f"{t.name} ({src})" for t, src in topics.items()))
        else:
            self.by_queue.pop(queue, None)
        self._targets.clear()
        self.active = bool(self.by_queue)

    def forget(self, queue: Destination) -> None:
        if self.by_queue.pop(queue, None) is not None:
            self._targets.clear()
            self.active = bool(self.by_queue)

    def of(self, queue: Destination) -> dict[Destination, str]:
        return dict(self.by_queue.get(queue, {}))

    def targets(self, topic: Destination) -> tuple[Destination, ...]:
        """The queues a publication to `topic` also goes to (cached per topic)."""
        found = self._targets.get(topic)
        if found is None:
            if topic.name.startswith(ADVISORY):
                found = ()
            else:
                found = tuple(q for q, topics in self.by_queue.items()
                              if any(t == topic or t.matches(topic) for t in topics))
            if len(self._targets) > 10_000:
                self._targets.clear()
            self._targets[topic] = found
        return found

    # -- the send filter ----------------------------------------------------------------
    def filter(self, ctx: SendContext, message: Message, next: Next) -> Awaitable[None]:
        if not self.active:
            return next(ctx, message)
        dest = message.destination
        if dest is None or not dest.is_topic or dest.is_wildcard or dest.is_composite:
            return next(ctx, message)
        targets = self.targets(dest)
        if not targets:
            return next(ctx, message)
        return self._publish(ctx, message, targets, next)

    async def _publish(self, ctx: SendContext, message: Message,
                       targets: tuple[Destination, ...], next: Next) -> None:
        topic = message.destination
        assert topic is not None
        annotations: dict[str, Any] = {**(message.annotations or {}),
                                       ORIGINAL_DESTINATION: topic.key}
        for queue in targets:
            if queue in self.by_queue:  # not deleted meanwhile
                await next(ctx, message.copy(destination=queue, annotations=annotations))
        await next(ctx, message)
