"""Topics: publish/subscribe through one subscription queue per subscriber.

A non-durable subscription lives as long as its consumer and only sees messages
published after it subscribed. A durable subscription (client id + name) is a
`SubscriptionQueue` with a store key, kept while its consumer is away and across
restarts when the store is persistent. Selectors and no-local are applied when a
message is published, so a subscription only ever holds what it will deliver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq.config.model import PolicyEntryConfig
from relaymq.dispatch.batch import SendBatch
from relaymq.dispatch.queue import Queue
from relaymq.dispatch.services import QueueServices
from relaymq.dispatch.stats import DestinationStatistics
from relaymq.model.destination import Destination
from relaymq.model.message import Message, SelectorView
from relaymq.spi.persistence import SubscriptionRecord

if TYPE_CHECKING:
    from relaymq.selector import Selector


class SubscriptionQueue(Queue):
    """The messages one topic subscription has yet to deliver."""

    kind = "subscription"

    def __init__(self, region: QueueServices, topic: Destination, key: str, policy: PolicyEntryConfig,
                 selector: Selector | None, no_local_connection: str | None = None,
                 record: SubscriptionRecord | None = None, last_seq: int = 0) -> None:
        super().__init__(region, topic, key, policy, last_seq)
        self.selector = selector
        self.no_local_connection = no_local_connection
        self.record = record
        # Only durable subscriptions keep messages across restarts.
        self.persists = record is not None and region.store_persistent

    @property
    def durable(self) -> bool:
        return self.record is not None

    def accepts(self, message: Message) -> bool:
        if self.no_local_connection is not None and message.producer_id == self.no_local_connection:
            return False
        sel = self.selector
        return sel is None or sel.matches(SelectorView(message))


class TopicSubscriptions:
    """The broker's topic subscriptions by topic, wildcard subscriptions included
    (what a publish fans out to; the lists are cached per topic)."""

    def __init__(self) -> None:
        self._by_topic: dict[Destination, list[SubscriptionQueue]] = {}
        self._wildcard: list[SubscriptionQueue] = []
        self._cache: dict[Destination, list[SubscriptionQueue]] = {}

    def add(self, sub: SubscriptionQueue) -> None:
        if sub.destination.is_wildcard:
            self._wildcard.append(sub)
        else:
            self._by_topic.setdefault(sub.destination, []).append(sub)
        self._cache.clear()

    def remove(self, sub: SubscriptionQueue) -> None:
        if sub in self._wildcard:
            self._wildcard.remove(sub)
        subs = self._by_topic.get(sub.destination)
        if subs and sub in subs:
            subs.remove(sub)
        self._cache.clear()

    def of(self, topic: Destination) -> list[SubscriptionQueue]:
        """The subscriptions a message published to `topic` goes to."""
        subs = self._cache.get(topic)
        if subs is None:
            subs = list(self._by_topic.get(topic, ()))
            subs += [s for s in self._wildcard if s.destination.matches(topic)]
            self._cache[topic] = subs
        return subs


class Topic:
    """A topic name: publishing fans out to every matching subscription."""

    kind = "topic"

    def __init__(self, subscriptions: TopicSubscriptions, destination: Destination,
                 policy: PolicyEntryConfig) -> None:
        self.subscriptions = subscriptions
        self.destination = destination
        self.key = destination.key
        self.policy = policy
        self.stats = DestinationStatistics()
        self.deleted = False

    def publish(self, message: Message, batch: SendBatch) -> None:
        self.stats.enqueued += 1
        for sub in self.subscriptions.of(self.destination):
            if sub.accepts(message):
                sub.prepare(message, batch)

    def size(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"<Topic {self.destination}>"
