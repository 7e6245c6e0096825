"""Local transactions: sends and acks that commit or roll back as one unit.

Sends are routed when they are made (so selectors, interceptors and limits apply
then) but their batch is held; acks are recorded but not applied. Commit hands
every held store operation and every ack removal to the store-write path as one
batch (broker/writer.py), which stores it, publishes its change-feed events and
makes the messages visible. Negative settlements made inside the transaction
(AMQP released, modified and rejected outcomes in a transactional state) are
applied after the commit's write, newest message first, so those that go back to
their queue keep their order there. Rollback discards
the sends and returns the acked and negatively settled messages to their queues
as redelivered; it produces no change-feed event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq.broker.writer import removal_origin
from relaymq.dispatch.batch import SendBatch
from relaymq.dispatch.consumer import ROLLED_BACK
from relaymq.errors import TransactionError
from relaymq.feed.constructors import removed
from relaymq.feed.events import RemovalReason
from relaymq.spi.persistence import RemoveMessage

if TYPE_CHECKING:
    from relaymq.broker.region import Region
    from relaymq.dispatch.consumer import Consumer, QueueBase
    from relaymq.dispatch.entry import QueueEntry


class LocalTransaction:
    def __init__(self, txid: str, region: Region) -> None:
        self.txid = txid
        self.region = region
        self.batch = SendBatch()
        self.acks: list[tuple[QueueBase, QueueEntry]] = []
        #: negative settlements (queue, entry, `NackMode`) waiting for the commit
        self.nacks: list[tuple[QueueBase, QueueEntry, str]] = []
        self.state = "active"

    def _check(self) -> None:
        if self.state != "active":
            raise TransactionError(f"transaction {self.txid} is {self.state}")

    def add_batch(self, batch: SendBatch) -> None:
        self._check()
        self.batch.absorb(batch)

    def add_ack(self, consumer: Consumer, entry: QueueEntry) -> None:
        self._check()
        assert consumer.queue is not None
        self.acks.append((consumer.queue, entry))

    def add_nack(self, consumer: Consumer, entry: QueueEntry, mode: str) -> None:
        self._check()
        assert consumer.queue is not None
        self.nacks.append((consumer.queue, entry, mode))

    async def commit(self) -> None:
        self._check()
        refusal = self.batch.refusal
        if refusal is not None:  # Artemis: a duplicate inside fails the whole commit
            self.rollback()
            raise TransactionError(refusal)
        self.state = "committing"
        batch = self.batch
        acks = self.acks
        batch.ops += [RemoveMessage(queue.key, entry.seq) for queue, entry in acks if entry.stored]
        if acks and self.region.feed.watch_removed:
            batch.events = [removed(entry.message, queue.destination, queue.key, entry.seq,
                                    RemovalReason.ACKED, removal_origin(entry))
                            for queue, entry in acks]
        if batch.ops or batch.placed or batch.events:
            await self.region.writer.commit(batch)
        for queue, entry in acks:
            queue.acknowledged(entry)
        for queue in dict.fromkeys(queue for queue, _ in acks):
            queue.dispatch()
        nacks, self.nacks = self.nacks, []
        # newest first: what goes back to its queue goes to the front, so the
        # returned messages keep their order (as after a rollback)
        nacks.sort(key=_newest_first)
        for queue, entry, mode in nacks:
            queue.settle_negative(entry, mode)
        self.state = "committed"

    def rollback(self) -> None:
        if self.state != "active":
            raise TransactionError(f"transaction {self.txid} is {self.state}")
        self.state = "rolled back"
        self.batch.abandon()
        by_queue: dict[QueueBase, list[QueueEntry]] = {}
        for queue, entry in self.acks:
            by_queue.setdefault(queue, []).append(entry)
        for queue, entry, _mode in self.nacks:
            by_queue.setdefault(queue, []).append(entry)
        for queue, entries in by_queue.items():
            queue.return_unacked(entries, ROLLED_BACK)
        self.acks.clear()
        self.nacks.clear()


def _newest_first(nack: tuple[QueueBase, QueueEntry, str]) -> int:
    return -nack[1].seq
