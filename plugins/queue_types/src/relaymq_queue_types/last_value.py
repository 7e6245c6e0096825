"""The `lastValue` queue type: Solace's last value queue (a spool of one message).

The queue holds only its newest message: a message arriving while another one
waits replaces it (the older one is forgotten, its stored copy removed). A
message a consumer already holds stays with it and is acknowledged as usual.
Browsing shows the one waiting message without taking it; selectors are refused.
A publisher that subscribes its own last value queue to the topics it publishes
learns, after a crash, the last message the broker accepted.

With `partitionCount` > 0 the queue is a partitioned last value queue: each
partition holds the last message that hashed to it (Solace: "for a partitioned
queue, each partition keeps the last message spooled to it"), and it is a
partitioned queue in every other respect (browsing refused, partitions bound to
consumers, rebalanced with hand-off).
"""

from __future__ import annotations

from typing import Any

from relaymq.dispatch.entry import QueueEntry
from relaymq.dispatch.queue import Queue

from relaymq_queue_types.partitioned import PartitionedQueue, partition_of
from relaymq_queue_types.solace import SolaceQueue, with_ttl_choice


class LastValueQueue(SolaceQueue):
    """Only the newest waiting message is kept."""

    refuses = "a last value queue holds one message"
    refuses_browsing = False

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.replaced = 0

    def enqueue(self, entry: QueueEntry) -> None:
        for older in list(self.pending):
            if self.remove_pending(older):
                self.replaced += 1
        super().enqueue(entry)


class PartitionedLastValueQueue(PartitionedQueue):
    """Only the newest waiting message of each partition is kept."""

    refuses = "a partitioned last value queue delivers each key's last message to one consumer"
    #: with a partition count of 0 it is a last value queue of one message
    unpartitioned_refuses = LastValueQueue.refuses
    unpartitioned_refuses_browsing = False

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.replaced = 0

    def enqueue(self, entry: QueueEntry) -> None:
        count = self.partition_count
        p = partition_of(entry, count) if count else 0
        for older in list(self.pending):
            if (not count or partition_of(older, count) == p) and self.remove_pending(older):
                self.replaced += 1
        super().enqueue(entry)


def last_value_queue(*args: Any) -> Queue:
    """The `lastValue` entry point: per queue, or per partition with `partitionCount`."""
    policy = args[3]
    if policy.partition_count > 0:
        return with_ttl_choice(PartitionedLastValueQueue, *args)
    return with_ttl_choice(LastValueQueue, *args)
