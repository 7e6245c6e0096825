"""`QueueTypes`: the plugin's per-broker service (``broker.extensions["queue-types"]``).

It binds the Solace queues to the broker's management API (which they ask
whether their dead message queue exists), keeps the topic subscriptions of
queues (configured, declared, or added at run time), and changes partition
counts. What it is asked to change at run time is stored through management's
declared queue settings (`set_queue_settings`), so it survives a restart:

```python
qt = broker.extensions["queue-types"]
await qt.add_subscription("orders.eu", "orders.*.eu")   # topic-to-queue mapping
qt.subscriptions_of("orders.eu")                        # ['orders.*.eu']
await qt.remove_subscription("orders.eu", "orders.*.eu")
await qt.set_partition_count("orders.book", 12)         # consumers are unbound
await qt.set_partition_count("orders.book", 0)          # a plain queue from now on
```
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from relaymq.errors import DestinationError
from relaymq.model.destination import Destination

from relaymq_queue_types.anonymous import AnonymousQueue
from relaymq_queue_types.partitioned import PartitionedQueue
from relaymq_queue_types.solace import SolaceQueue
from relaymq_queue_types.subscriptions import SETTING, TopicSubscriptions, parse_topics

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.config.model import BrokerConfig

log = logging.getLogger("relaymq.queue_types")

EXTENSION = "queue-types"
#: seconds a closed consumer's connection must stay open for the close to be an unbind
UNBIND_SETTLE = 0.25
#: the setting holding a partition count set through `set_partition_count`
PARTITION_COUNT = "partitionCount"


def _queue(target: Destination | str) -> Destination:
    if isinstance(target, Destination):
        return target
    return Destination.parse(target) if "://" in target else Destination.queue(target)


class QueueTypes:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.management = broker.management
        self._tasks: set[asyncio.Task[None]] = set()
        self.subscriptions = TopicSubscriptions()
        #: the send filter of topic subscriptions on queues; left out of the broker's
        #: chain while no queue subscribes to a topic (it then costs no call per message)
        self.send_filter = self.subscriptions.filter
        #: `<queue topicSubscriptions>` of the configuration
        self._declared: dict[Destination, list[Destination]] = {}
        #: partitioned queue -> the `partitionCount` its policy gave when last looked at
        self._policy_counts: dict[Destination, int] = {}

    def configure(self, config: BrokerConfig) -> None:
        declared: dict[Destination, list[Destination]] = {}
        for decl in config.destinations:
            if decl.kind == "queue" and decl.topic_subscriptions:
                declared[Destination.queue(decl.physical_name)] = parse_topics(
                    decl.topic_subscriptions)
        self._declared = declared

    # -- queues come and go -------------------------------------------------------------
    def queue_added(self, dest: Destination) -> None:
        if not dest.is_queue:
            return
        queue = self.management.queue(dest)
        if isinstance(queue, SolaceQueue):
            queue.management = self.management
            if isinstance(queue, PartitionedQueue) and not dest.is_temporary:
                self._policy_counts[dest] = queue.policy.partition_count
                count = self.management.queue_settings(dest).get(PARTITION_COUNT)
                if isinstance(count, int) and count >= 0 and count != queue.partition_count:
                    queue.change_partition_count(count)  # no consumer yet: nothing moves
        self.refresh(dest)

    def consumer_removed(self, consumer: Any) -> None:
        """A client unbinding from its anonymous queue removes the queue (Solace); a
        consumer closing because its connection closed leaves the grace to the kernel."""
        dest = consumer.destination
        if not dest.is_temporary or consumer.browser:
            return
        queue = self.management.queue(dest)
        if not isinstance(queue, AnonymousQueue) or queue.consumers:
            return
        conn = consumer.connection
        if conn is None or conn.closed or dest not in conn.temporary:
            return
        # Transports close a lost client's consumers before its connection: an unbind
        # is a consumer close whose connection is still open a moment later.
        asyncio.get_running_loop().call_later(UNBIND_SETTLE, self._unbound, dest, conn)

    def _unbound(self, dest: Destination, conn: Any) -> None:
        queue = self.management.queue(dest)
        if (not isinstance(queue, AnonymousQueue) or queue.consumers or conn.closed
                or dest not in conn.temporary):
            return
        log.info("%s: its client unbound; removed", dest)
        conn.temporary.remove(dest)
        loop = asyncio.get_running_loop()
        self._tasks.add(task := loop.create_task(self._broker.delete_temporary(dest, now=True)))
        task.add_done_callback(self._tasks.discard)

    def queue_removed(self, dest: Destination) -> None:
        self.subscriptions.forget(dest)
        self._policy_counts.pop(dest, None)
        self.filter_changed()

    def filter_changed(self) -> None:
        """Put the send filter in the broker's chain while some queue subscribes to
        a topic, and take it out when none does."""
        self._broker.set_filter_idle(self.send_filter, not self.subscriptions.active)

    def refresh(self, dest: Destination) -> None:
        """Recompute `dest`'s topic subscriptions from every source."""
        queue = self.management.queue(dest)
        if queue is None:
            self.subscriptions.forget(dest)
            self.filter_changed()
            return
        topics: dict[Destination, str] = {}
        try:
            for t in parse_topics(getattr(queue.policy, "topic_subscriptions", None)):
                topics[t] = "policy"
        except DestinationError as exc:
            log.error("%s: topicSubscriptions of its <policyEntry>: %s", dest, exc)
        for t in self._declared.get(dest, ()):
            topics.setdefault(t, "declaration")
        if not dest.is_temporary:
            for t in parse_topics(self.management.queue_settings(dest).get(SETTING) or []):
                topics.setdefault(t, "management")
        self.subscriptions.set(dest, topics)
        self.filter_changed()

    def reloaded(self, config: BrokerConfig) -> None:
        """A configuration reload: policies and declarations may name other topics,
        partitioned queues another partition count."""
        self.configure(config)
        for dest, queue in list(self.management.queues.items()):
            self.refresh(dest)
            if isinstance(queue, PartitionedQueue) and not dest.is_temporary:
                before = self._policy_counts.get(dest, 0)
                count = self._policy_counts[dest] = queue.policy.partition_count
                if PARTITION_COUNT in self.management.queue_settings(dest):
                    continue  # set through management: that count holds
                if count <= 0 < before:  # the policy no longer gives it partitions
                    count = 1 if queue.policy.queue_type == "partitioned" else 0
                if (count > 0 or before > 0) and count != queue.partition_count:
                    queue.change_partition_count(count)

    # -- management: topic subscriptions ----------------------------------------------
    def subscriptions_of(self, queue: Destination | str) -> list[str]:
        """The topics `queue` subscribes to (every source), as names."""
        return [t.name for t in self.subscriptions.of(_queue(queue))]

    def subscription_sources(self, queue: Destination | str) -> dict[str, str]:
        """Topic name -> where the subscription comes from (policy, declaration, management)."""
        return {t.name: src for t, src in self.subscriptions.of(_queue(queue)).items()}

    async def add_subscription(self, queue: Destination | str, topic: str) -> list[str]:
        """Subscribe an existing queue to `topic` (wildcards allowed); stored, so it
        lasts across restarts. Returns the queue's topics."""
        dest = self._existing(queue)
        (t,) = parse_topics([topic])
        added = [x for x in self.management.queue_settings(dest).get(SETTING) or []]
        if t.name not in added:
            await self.management.set_queue_settings(dest, {SETTING: [*added, t.name]})
        self.refresh(dest)
        return self.subscriptions_of(dest)

    async def remove_subscription(self, queue: Destination | str, topic: str) -> bool:
        """Remove a subscription added through management; False when there was none.
        Configured ones (policy, declaration) are changed in the configuration."""
        dest = self._existing(queue)
        (t,) = parse_topics([topic])
        added = [x for x in self.management.queue_settings(dest).get(SETTING) or []]
        if t.name not in added:
            source = self.subscriptions.of(dest).get(t)
            if source is not None:
                raise DestinationError(f"{dest} subscribes to {t.name} by its {source}; "
                                       "change the configuration to remove it")
            return False
        added.remove(t.name)
        await self.management.set_queue_settings(dest, {SETTING: added or None})
        self.refresh(dest)
        return True

    # -- management: partition count -----------------------------------------------------
    async def set_partition_count(self, queue: Destination | str, count: int) -> dict[str, Any]:
        """Change a partitioned queue's partition count (stored; it overrides the
        policy's from now on, also after a restart). Bound consumers are unbound,
        as in Solace; no message is dropped. 0 makes it a plain queue, a count above
        0 partitioned again. Returns what happened."""
        dest = self._existing(queue)
        q = self.management.queue(dest)
        if not isinstance(q, PartitionedQueue):
            raise DestinationError(f"{dest} is not a partitioned queue (its type is "
                                   f"{getattr(q, 'queue_type', '?')}); the type changes with "
                                   "the configuration and a restart")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise DestinationError(f"partition count {count!r}: a count is 0 (a non-partitioned "
                                   "queue) or more")
        await self.management.set_queue_settings(dest, {PARTITION_COUNT: count})
        return q.change_partition_count(count)

    def _existing(self, queue: Destination | str) -> Destination:
        dest = _queue(queue)
        if not dest.is_queue or self.management.queue(dest) is None:
            raise DestinationError(f"{dest} is not an existing queue")
        if dest.is_temporary:
            raise DestinationError(f"{dest} is temporary: subscriptions and settings are "
                                   "for queues that outlive a connection")
        return dest
