"""The `lastValue` queue type: Solace's last value queue (a spool of one message).

The queue holds only its newest message: a message arriving while another one
waits replaces it (the older one is forgotten, its stored copy removed). A
message a consumer already holds stays with it and is acknowledged as usual;
if the consumer gives it back (releases or NACKs it, leaves without
acknowledging it, rolls back the transaction that acknowledged it, or is unbound
by a partition count change) after a newer message arrived, it is replaced then
(Artemis does the same with a cancelled delivery), so the queue never holds a
stale value beside the newer one. On recovery after a restart, and after a
partition count change, each slot keeps only its newest waiting message. Browsing shows the one waiting message without
taking it; selectors are refused. A publisher that subscribes its own last
value queue to the topics it publishes learns, after a crash, the last message
the broker accepted.

With `partitionCount` > 0 the queue is a partitioned last value queue: each
partition holds the last message that hashed to it (Solace: "for a partitioned
queue, each partition keeps the last message spooled to it"), and it is a
partitioned queue in every other respect (browsing refused, partitions bound to
consumers, rebalanced with hand-off).
"""

from __future__ import annotations

import logging
from typing import Any

from relaymq.dispatch.consumer import CONSUMER_LEFT, NackMode
from relaymq.dispatch.entry import QueueEntry
from relaymq.dispatch.queue import REPLACED, Queue

from relaymq_queue_types.partitioned import PartitionedQueue, partition_of
from relaymq_queue_types.solace import SolaceQueue, with_ttl_choice

log = logging.getLogger("relaymq.queue_types")
#: stored messages a recovery reads at once while it looks for older values
RECOVERY_READ = 1000


class LastValues(SolaceQueue):
    """What both last value queues share: a message that comes back from a consumer
    after a newer one of its slot (the queue, or its partition) arrived is replaced
    instead of returning."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: slot -> the sequence number of the message that arrived last there
        self._latest: dict[int, int] = {}
        #: failed deliveries waiting out a redelivery delay (neither pending nor held)
        self._returning: list[QueueEntry] = []

    @property
    def replaced(self) -> int:
        """Messages a newer one of their slot superseded (management's
        `DestinationInfo.replaced`)."""
        return self.stats.replaced

    def slot(self, entry: QueueEntry) -> int:
        """Where `entry` competes for the last value: the whole queue."""
        return 0

    def arrived(self, entry: QueueEntry) -> None:
        """`entry` is its slot's last value now; a message of the slot waiting out a
        redelivery delay is replaced at once."""
        slot = self.slot(entry)
        self._latest[slot] = entry.seq
        if self._returning:
            waiting = []
            for older in self._returning:
                if older.removed or older.consumer is not None or self.pending.get(older.seq) is older:
                    continue  # settled, delivered again or back in the queue
                if self.slot(older) == slot:
                    self._replace(older)
                else:
                    waiting.append(older)
            self._returning = waiting

    def superseded(self, entry: QueueEntry) -> bool:
        latest = self._latest.get(self.slot(entry))
        return latest is not None and latest > entry.seq

    def _replace(self, entry: QueueEntry) -> None:
        """Forget a message that is neither pending nor held (counted as replaced)."""
        self.stats.replaced += 1
        self.drop(entry, REPLACED)

    def settle_negative(self, entry: QueueEntry, mode: str) -> None:
        if mode != NackMode.REJECT and self.superseded(entry):
            self._out_of_flight(entry)
            self._replace(entry)
            self.dispatch()  # the consumer has room again
            return
        super().settle_negative(entry, mode)
        if not entry.removed and entry.consumer is None and self.pending.get(entry.seq) is None:
            self._returning.append(entry)  # redelivered after the policy's delay

    def return_unacked(self, entries: list[QueueEntry], cause: str = CONSUMER_LEFT) -> None:
        """Deliveries that end unacknowledged (a rolled-back transaction, a consumer
        the broker unbinds, one that leaves): a superseded one is replaced, not put
        back. One newer than what waits in its slot (possible only after a partition
        count change moved it to another slot) replaces the older waiting ones."""
        back = []
        newer: dict[int, int] = {}
        for entry in entries:
            if self.superseded(entry):
                self._out_of_flight(entry)
                self._replace(entry)
                continue
            back.append(entry)
            slot = self.slot(entry)
            if entry.seq > self._latest.get(slot, 0):
                self._latest[slot] = newer[slot] = entry.seq
        if newer:
            for older in [e for e in self.pending if newer.get(self.slot(e), 0) > e.seq]:
                if self.remove_pending(older):
                    self.stats.replaced += 1
        super().return_unacked(back, cause)  # counted as failed deliveries (`SolaceQueue`)

    def keep_newest(self) -> int:
        """Keep only the newest waiting message of each slot (after a recovery, or a
        partition count change that gave messages new slots); the others, waiting or
        waiting out a redelivery delay, are replaced. Returns how many."""
        returning = [e for e in self._returning
                     if not e.removed and e.consumer is None and self.pending.get(e.seq) is not e]
        newest: dict[int, QueueEntry] = {}
        stale: list[QueueEntry] = []
        for entry in sorted([*self.pending, *returning], key=lambda e: e.seq):
            slot = self.slot(entry)
            older = newest.get(slot)
            if older is not None:
                stale.append(older)
            newest[slot] = entry
        n = 0
        for entry in stale:
            if entry in returning:
                self._replace(entry)
                n += 1
            elif self.remove_pending(entry):
                self.stats.replaced += 1
                n += 1
        self._returning = [e for e in returning if not e.removed]
        self._latest = {slot: e.seq for slot, e in newest.items()}
        return n

    async def recover(self) -> int:
        """After a restart: a crash may have left older values stored beside the newer
        one (a consumer held them when it arrived). Every stored message is looked
        at, not only the first window that recovery reads into memory: only the
        newest of each slot is kept, the others are replaced, in memory or in the store."""
        count = await super().recover()
        if not count:
            return 0
        newest, stale = await self._stored_slots()
        replaced = await self.remove_messages(stale, REPLACED) if stale else 0
        self.stats.replaced += replaced
        self._latest = newest
        if replaced:
            log.info("%s: %d older values found stored at recovery were replaced by newer ones",
                     self.destination, replaced)
        return count - replaced

    async def _stored_slots(self) -> tuple[dict[int, int], list[int]]:
        """The newest stored message of each slot (slot -> sequence number) and the
        sequence numbers of the older ones."""
        newest: dict[int, int] = {}
        stale: list[int] = []
        after = 0
        while True:
            records = await self.read_stored(after, RECOVERY_READ)
            for rec in records:  # in sequence order: a later one of a slot is newer
                slot = self.slot(QueueEntry(rec.seq, rec.message, True))
                older = newest.get(slot)
                if older is not None:
                    stale.append(older)
                newest[slot] = rec.seq
            if len(records) < RECOVERY_READ:
                return newest, stale
            after = records[-1].seq


class LastValueQueue(LastValues):
    """Only the newest waiting message is kept."""

    refuses = "a last value queue holds one message"
    refuses_browsing = False

    def enqueue(self, entry: QueueEntry) -> None:
        for older in list(self.pending):
            if self.remove_pending(older):
                self.stats.replaced += 1
        self.arrived(entry)
        super().enqueue(entry)


class PartitionedLastValueQueue(LastValues, PartitionedQueue):
    """Only the newest waiting message of each partition is kept."""

    refuses = "a partitioned last value queue delivers each key's last message to one consumer"
    #: with a partition count of 0 it is a last value queue of one message
    unpartitioned_refuses = LastValueQueue.refuses
    unpartitioned_refuses_browsing = False

    def slot(self, entry: QueueEntry) -> int:
        count = self.partition_count
        return partition_of(entry, count) if count else 0

    def enqueue(self, entry: QueueEntry) -> None:
        count = self.partition_count
        p = partition_of(entry, count) if count else 0
        for older in list(self.pending):
            if (not count or partition_of(older, count) == p) and self.remove_pending(older):
                self.stats.replaced += 1
        self.arrived(entry)
        super().enqueue(entry)

    def change_partition_count(self, count: int) -> dict[str, int]:
        """As for a partitioned queue; what the unbound consumers held is replaced when
        a newer value of its old partition waits, and then each new partition keeps
        only its newest waiting message (`replaced` in the report)."""
        report = super().change_partition_count(count)
        report["replaced"] = stale = self.keep_newest()  # slots are the new partitions now
        if stale:
            log.info("%s: %d waiting values replaced by newer ones of their new partition",
                     self.destination, stale)
        return report


def last_value_queue(*args: Any) -> Queue:
    """The `lastValue` entry point: per queue, or per partition with `partitionCount`."""
    policy = args[3]
    if policy.partition_count > 0:
        return with_ttl_choice(PartitionedLastValueQueue, *args)
    return with_ttl_choice(LastValueQueue, *args)
