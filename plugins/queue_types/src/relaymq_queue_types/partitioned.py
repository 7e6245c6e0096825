"""The `partitioned` queue type: ordered per key, parallel across keys (Solace).

A partitioned queue has `partitionCount` hidden partitions. A message's partition
is crc32(key) mod N, its key the message group id (AMQP `properties.group-id`,
STOMP/JMS `JMSXGroupID`); a message without a key goes to a partition chosen by
its sequence number. Each partition is bound to at most one consumer, a consumer
may own several, and a consumer that owns none is inactive.

Ownership follows the consumers: the first consumer takes every partition at
once; when consumers join or leave, the partitions are rebalanced (evenly, as few
moving as possible) after `partitionRebalanceDelay` ms. A partition whose owner
left goes to a remaining consumer at once (its unacknowledged messages return,
marked redelivered). A partition moving from a live consumer is *handed off*:
nothing more of it is delivered until the old owner has settled every message of
it that it holds, or `partitionMaxHandoffTime` ms pass; then the new owner gets
it. So a key's messages are delivered in order and never to two consumers at once.

Browsing and selectors are refused at subscribe/attach (Solace does the same).

Messages a consumer acknowledged inside a local transaction that is still open
count as held by it: a hand-off waits for the transaction's commit or rollback
(a rollback returns them to the partition's consumer, redelivered, in order).

A partition count of 0 (set by a reload or management) makes the queue a plain
non-partitioned one until a count above 0 is set again: competing consumers,
message groups by `JMSXGroupID` as on any queue, browsing and selectors allowed.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import Any

from relaymq.dispatch.consumer import Consumer
from relaymq.dispatch.entry import QueueEntry
from relaymq.dispatch.queue import Queue

from relaymq_queue_types.solace import SolaceQueue, with_ttl_choice

log = logging.getLogger("relaymq.queue_types")
#: keys whose partition a queue remembers (then it starts over)
KEY_CACHE = 65536


def partition_of(entry: QueueEntry, count: int) -> int:
    key = entry.message.group_id
    if key is None:
        return entry.seq % count
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % count


class PartitionedQueue(SolaceQueue):
    """Partitions bound to consumers, rebalanced with hand-off."""

    refuses: str | None = "a partitioned queue delivers each key's messages to one consumer in order"

    #: what the queue refuses while its partition count is 0 (a plain queue)
    unpartitioned_refuses: str | None = None
    unpartitioned_refuses_browsing = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: partitions; 0 once a change made the queue non-partitioned
        self.partition_count = max(1, self.policy.partition_count or 1)
        self.custom_choice = True
        self.exclusive_access = False
        #: partition -> owning consumer (None: unowned)
        self.owners: list[Consumer | None] = [None] * self.partition_count
        #: partition -> (consumer taking it over, monotonic deadline of the hand-off)
        self.handoffs: dict[int, tuple[Consumer, float]] = {}
        self.rebalances = 0
        #: key -> partition (crc32 once per key; cleared when the count changes)
        self._keys: dict[str, int] = {}
        self._rebalance: asyncio.TimerHandle | None = None
        self._handoff_timer: asyncio.TimerHandle | None = None

    # -- choosing ----------------------------------------------------------------------
    def select_consumer(self, entry: QueueEntry, consumers: list[Consumer]) -> Consumer | None:
        # the per-message path: a key's partition is hashed once (`_keys`)
        key = entry.message.group_id
        if key is None:
            p = entry.seq % self.partition_count
        else:
            p = self._keys.get(key, -1)
            if p < 0:
                p = self._key_partition(key)
        handoffs = self.handoffs
        if handoffs and p in handoffs and not self._finish_handoff(p):
            return None
        owner = self.owners[p]
        if owner is None or owner.capacity() <= 0:  # (a closed consumer has no capacity)
            return None
        return owner

    def _key_partition(self, key: str) -> int:
        keys = self._keys
        if len(keys) >= KEY_CACHE:
            keys.clear()
        p = keys[key] = zlib.crc32(key.encode("utf-8", "surrogatepass")) % self.partition_count
        return p

    def active_consumers(self) -> list[Consumer]:
        """Consumers owning a partition (during a hand-off: its old owner)."""
        if not self.partition_count:
            return super().active_consumers()
        owning = {id(c) for c in self.owners if c is not None}
        return [c for c in self.consumers if id(c) in owning]

    def partitions_of(self, consumer: Consumer) -> list[int] | None:
        if not self.partition_count:
            return None
        return [p for p, c in enumerate(self.owners) if c is consumer]

    def _owned(self, consumer: Consumer) -> list[int]:
        return [p for p, c in enumerate(self.owners) if c is consumer]

    # -- consumers come and go -------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        if not self.partition_count:
            super().add_consumer(consumer)
            return
        first = not any(c is not None for c in self.owners)
        super().add_consumer(consumer)
        if first:
            self.owners = [consumer] * self.partition_count
            self.dispatch()
        else:
            self._schedule_rebalance()

    def remove_consumer(self, consumer: Consumer) -> None:
        if not self.partition_count:
            super().remove_consumer(consumer)
            return
        orphaned = self._owned(consumer)
        for p, (taker, _) in list(self.handoffs.items()):
            if taker is consumer:
                del self.handoffs[p]  # the old owner keeps it until the next rebalance
        for p in orphaned:
            self.owners[p] = None
            self.handoffs.pop(p, None)
        # a paused queue's consumers too: they keep what they own until it resumes
        remaining = [c for c in self.bound_consumers() if c is not consumer and not c.browser]
        if remaining:
            for p in orphaned:  # nothing to hand off: the old owner is gone
                self.owners[p] = min(remaining, key=lambda c: len(self._owned(c)))
            self._schedule_rebalance()
        super().remove_consumer(consumer)  # returns its unacknowledged messages

    # -- rebalancing -----------------------------------------------------------------------
    def _schedule_rebalance(self) -> None:
        if self._rebalance is not None:
            self._rebalance.cancel()
        delay = max(0, self.policy.partition_rebalance_delay) / 1000
        self._rebalance = asyncio.get_running_loop().call_later(delay, self.rebalance)

    def rebalance(self) -> None:
        """Spread the partitions evenly over the consumers, moving as few as possible;
        a partition leaving a live consumer is handed off."""
        self._rebalance = None
        consumers = [c for c in self.bound_consumers() if not c.closed]
        if not consumers or self.deleted or not self.partition_count:
            return
        self.rebalances += 1
        n, k = self.partition_count, len(consumers)
        quota = {id(c): n // k + (1 if i < n % k else 0) for i, c in enumerate(consumers)}
        target: list[Consumer | None] = [None] * n
        held: dict[int, int] = {id(c): 0 for c in consumers}
        for p, owner in enumerate(self.owners):  # keep what fits the quota
            if owner is not None and id(owner) in quota and held[id(owner)] < quota[id(owner)]:
                target[p] = owner
                held[id(owner)] += 1
        for p in range(n):
            if target[p] is None:
                taker = next(c for c in consumers if held[id(c)] < quota[id(c)])
                target[p] = taker
                held[id(taker)] += 1
        deadline = asyncio.get_running_loop().time() + \
            max(0, self.policy.partition_max_handoff_time) / 1000
        moved = 0
        for p, new in enumerate(target):
            old = self.owners[p]
            assert new is not None
            if old is new:
                self.handoffs.pop(p, None)
                continue
            moved += 1
            if old is None or old.closed:
                self.owners[p] = new
                self.handoffs.pop(p, None)
            else:
                self.handoffs[p] = (new, deadline)
        log.info("%s: rebalanced %d partitions over %d consumers (%d moving)",
                 self.destination, n, k, moved)
        if self.handoffs:
            self._arm_handoff_timer()
        self.dispatch()

    def _finish_handoff(self, p: int) -> bool:
        """Complete partition `p`'s hand-off if its old owner holds none of it (neither
        unacknowledged nor acknowledged in a transaction that is still open)."""
        taker, deadline = self.handoffs[p]
        old = self.owners[p]
        if old is not None and not old.closed and asyncio.get_running_loop().time() < deadline:
            count = self.partition_count
            if any(partition_of(e, count) == p for e in old.inflight.values()):
                return False
            if self._acked_in_open_transaction(old, p):
                return False
        del self.handoffs[p]
        self.owners[p] = taker
        return True

    def _acked_in_open_transaction(self, consumer: Consumer, p: int) -> bool:
        """Whether `consumer` acknowledged a message of partition `p` in a local
        transaction of its connection that has not ended (a rollback would return it
        to the queue, so the partition is not free yet)."""
        transactions = getattr(consumer.connection, "transactions", None)
        if not transactions:
            return False
        count = self.partition_count
        for txn in list(transactions.values()):
            for queue, entry in txn.acks:
                if (queue is self and entry.consumer is consumer and not entry.removed
                        and partition_of(entry, count) == p):
                    return True
        return False

    def _arm_handoff_timer(self) -> None:
        if self._handoff_timer is not None:
            self._handoff_timer.cancel()
        loop = asyncio.get_running_loop()
        first = min(deadline for _, deadline in self.handoffs.values())
        self._handoff_timer = loop.call_at(first, self._handoff_due)

    def _handoff_due(self) -> None:
        self._handoff_timer = None
        now = asyncio.get_running_loop().time()
        for p in [p for p, (_, deadline) in self.handoffs.items() if deadline <= now]:
            self._finish_handoff(p)
        if self.handoffs:
            self._arm_handoff_timer()
        self.dispatch()

    # -- changing the partition count ----------------------------------------------------
    def change_partition_count(self, count: int) -> dict[str, int]:
        """Solace's partition scaling: every bound consumer is unbound (told why: a
        STOMP ERROR frame, an AMQP detach), so what they held returns, marked
        redelivered, and no key is on two consumers across the change; then the
        messages map to `crc32(key) mod count`. Nothing is dropped: the messages of
        removed partitions move with their keys (counted and logged as
        `remapped`). Consumers that bind again get the partitions anew (the first
        takes all, the others after the rebalance delay). A count of 0 makes it a
        plain queue (its waiting messages are dispatched in the queue's order to
        competing consumers); a count above 0 makes it partitioned again."""
        old = self.partition_count
        count = max(0, int(count))
        if count == old:
            return {"from": old, "to": count, "unbound": 0, "remapped": 0, "waiting": self.size()}
        for timer in (self._rebalance, self._handoff_timer):
            if timer is not None:
                timer.cancel()
        self._rebalance = self._handoff_timer = None
        reason = (f"{self.destination}: its partition count changed from {old} to {count}; "
                  "bind again")
        bound = list(self.bound_consumers())
        self.owners = [None] * old
        self.handoffs.clear()
        self.unbinding = True  # the consumers did not fail: their deliveries are not counted
        try:
            for consumer in bound:  # unbound before the new mapping applies
                super().remove_consumer(consumer)
        finally:
            self.unbinding = False
        self.partition_count = count
        self._keys.clear()
        self.owners = [None] * count
        self._set_partitioned(count > 0)
        remapped = 0 if not old or not count else sum(
            1 for e in self.pending if partition_of(e, old) != partition_of(e, count))
        for consumer in bound:  # the transport tells its client and closes its side
            if consumer.on_closed is not None:
                consumer.on_closed(reason)
            consumer.closed = True
        if count and old:
            moved = f"{remapped} of {self.size()} waiting messages in memory moved to " \
                "another partition (none dropped)"
        elif count:
            moved = f"partitioned again; {self.size()} waiting messages mapped to partitions"
        else:
            moved = f"no longer partitioned; {self.size()} waiting messages keep the " \
                "queue's order (none dropped)"
        log.log(logging.WARNING if bound else logging.INFO,
                "%s: partition count changed from %d to %d; %d consumers unbound, %s",
                self.destination, old, count, len(bound), moved)
        return {"from": old, "to": count, "unbound": len(bound), "remapped": remapped,
                "waiting": self.size()}

    def _set_partitioned(self, partitioned: bool) -> None:
        """Switch between partitioned and plain (a count of 0) behaviour."""
        cls = type(self)
        if partitioned:
            self.refuses = cls.refuses
            self.refuses_browsing = cls.refuses_browsing
            self.custom_choice = True
            if self.queue_type == "solace":
                self.queue_type = "partitioned"
        else:
            self.refuses = cls.unpartitioned_refuses
            self.refuses_browsing = cls.unpartitioned_refuses_browsing
            self.custom_choice = False
            if self.queue_type == "partitioned":
                self.queue_type = "solace"

    def close_all(self, reason: str) -> None:
        for timer in (self._rebalance, self._handoff_timer):
            if timer is not None:
                timer.cancel()
        super().close_all(reason)


def partitioned_queue(*args: Any) -> Queue:
    """The `partitioned` entry point."""
    return with_ttl_choice(PartitionedQueue, *args)
