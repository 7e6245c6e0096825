"""`QueueServices`: what queues and topics need from the broker.

The store and its write path, the change feed, memory usage, redelivery policies,
dead-lettering and expiry events. `broker.region.Region` is the implementation;
queues hold it as a `QueueServices`, so dispatch/ does not import the broker layer
that creates the queues (and the compiled build still reaches it natively).
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from relaymq.broker.usage import SystemUsage
from relaymq.broker.writer import StoreWriter
from relaymq.dispatch.consumer import QueueBase
from relaymq.dispatch.entry import QueueEntry
from relaymq.dispatch.redelivery import RedeliveryPolicyMap
from relaymq.feed.feed import ChangeFeed
from relaymq.spi.persistence import PersistenceAdapter


@mypyc_attr(allow_interpreted_subclasses=True)
class QueueServices:
    """The broker's services, as a queue sees them (`Queue.region`)."""

    store: PersistenceAdapter
    #: the store keeps messages across restarts (not the memory store)
    store_persistent: bool
    #: the one store-write path and group commit (broker/writer.py)
    writer: StoreWriter
    feed: ChangeFeed
    usage: SystemUsage
    #: the `redeliveryPlugin`'s policies, when configured
    redelivery: RedeliveryPolicyMap | None

    def dead_letter(self, queue: QueueBase, entry: QueueEntry, reason: str, expired: bool) -> None:
        """Move `entry` to its dead-letter queue (or drop it, as the policy says)."""
        raise NotImplementedError

    def message_expired(self, queue: QueueBase, entry: QueueEntry) -> None:
        """Tell plugins that `entry` expired (its removal is the queue's)."""
        raise NotImplementedError
