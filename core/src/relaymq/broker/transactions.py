"""Local transactions: sends and acks that commit or roll back as one unit.

Sends are routed when they are made (so selectors, interceptors and limits apply
then) but their batch is held; acks are recorded but not applied. Commit writes
every held store operation and every ack removal in one store batch, then makes
the messages visible. Rollback discards the sends and returns the acked
messages to their queues as redelivered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq.broker.router import SendBatch
from relaymq.errors import TransactionError
from relaymq.spi.persistence import RemoveMessage

if TYPE_CHECKING:
    from relaymq.broker.region import Region
    from relaymq.dispatch.consumer import Consumer
    from relaymq.dispatch.entry import QueueEntry


class LocalTransaction:
    def __init__(self, txid: str, region: Region) -> None:
        self.txid = txid
        self.region = region
        self.batch = SendBatch()
        self.acks: list[tuple[Consumer, QueueEntry]] = []
        self.state = "active"

    def _check(self) -> None:
        if self.state != "active":
            raise TransactionError(f"transaction {self.txid} is {self.state}")

    def add_batch(self, batch: SendBatch) -> None:
        self._check()
        self.batch.ops.extend(batch.ops)
        self.batch.placed.extend(batch.placed)

    def add_ack(self, consumer: Consumer, entry: QueueEntry) -> None:
        self._check()
        self.acks.append((consumer, entry))

    async def commit(self) -> None:
        self._check()
        self.state = "committing"
        ops = list(self.batch.ops)
        for _consumer, entry in self.acks:
            if entry.stored:
                queue = _queue_of(_consumer, entry)
                ops.append(RemoveMessage(queue.key, entry.seq))
        if ops:
            await self.region.store.write(ops)
        for _consumer, entry in self.acks:
            queue = _queue_of(_consumer, entry)
            queue._remove_entry(entry)
            queue.stats.dequeued += 1
            queue.stats.in_flight -= 1
        for queue, entry in self.batch.placed:
            queue.enqueue(entry)
        touched = {id(_queue_of(c, e)): _queue_of(c, e) for c, e in self.acks}
        for q in touched.values():
            q.dispatch()
        self.state = "committed"

    def rollback(self) -> None:
        if self.state != "active":
            raise TransactionError(f"transaction {self.txid} is {self.state}")
        self.state = "rolled back"
        self.batch.abandon()
        by_queue: dict[int, list[QueueEntry]] = {}
        queues = {}
        for consumer, entry in self.acks:
            q = _queue_of(consumer, entry)
            queues[id(q)] = q
            by_queue.setdefault(id(q), []).append(entry)
        for qid, entries in by_queue.items():
            q = queues[qid]
            for entry in sorted(entries, key=lambda e: e.seq, reverse=True):
                entry.consumer = None
                entry.delivery_count += 1
                q.stats.in_flight -= 1
                q.pending.put_back(entry)
            q.dispatch()
        self.acks.clear()


def _queue_of(consumer: Consumer, entry: QueueEntry):  # type: ignore[no-untyped-def]
    assert consumer.queue is not None
    return consumer.queue
