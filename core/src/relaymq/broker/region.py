"""The broker's destinations: creation, lookup (wildcards), deletion, recovery.

Also the services queues need from the broker: the store (with acks batched per
event-loop turn into one write), dead-lettering, expiry events and flow control.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from relaymq.dispatch.deadletter import dead_letter_copy, dead_letter_destination
from relaymq.dispatch.entry import QueueEntry
from relaymq.dispatch.policy import PolicyMap
from relaymq.dispatch.queue import Queue
from relaymq.dispatch.redelivery import RedeliveryPolicyMap
from relaymq.dispatch.topic import SubscriptionQueue, Topic
from relaymq.errors import DestinationError, ResourceLimitExceeded
from relaymq.model.destination import Destination
from relaymq.spi.persistence import (
    AddDestination,
    PersistenceAdapter,
    RemoveDestination,
    RemoveMessage,
    StoreOp,
)

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.broker.router import SendBatch
    from relaymq.broker.usage import SystemUsage

log = logging.getLogger("relaymq.region")


class Region:
    def __init__(self, broker: Broker, store: PersistenceAdapter, policies: PolicyMap,
                 usage: SystemUsage) -> None:
        self.broker = broker
        self.store = store
        self.store_persistent = store.persistent
        self.policies = policies
        self.usage = usage
        self.redelivery: RedeliveryPolicyMap | None = None
        self.queues: dict[Destination, Queue] = {}
        self.topics: dict[Destination, Topic] = {}
        self.subscriptions: dict[str, SubscriptionQueue] = {}  # by key
        self._topic_subs: dict[Destination, list[SubscriptionQueue]] = {}
        self._wildcard_subs: list[SubscriptionQueue] = []
        self._sub_cache: dict[Destination, list[SubscriptionQueue]] = {}
        self._pending_removes: list[StoreOp] = []
        self._removes_future: asyncio.Future[None] | None = None
        self._retired_seq: dict[Destination, int] = {}
        self._pending_commits: list[tuple[SendBatch, asyncio.Future[None]]] = []
        self._store_refusal_logged = -1e9  # monotonic time of the last "refused" log line
        #: queue type name -> factory (`relaymq.queue_types`); the broker adds the
        #: types its configuration names, management the ones it is asked for
        self.queue_types: dict[str, Callable[..., Queue]] = {"standard": Queue}
        #: queues declared with a type (`<queue queueType=..>`, management)
        self.declared_types: dict[Destination, str] = {}

    # -- destinations -----------------------------------------------------------------
    async def queue(self, dest: Destination) -> Queue:
        q = self.queues.get(dest)
        if q is not None:
            return q
        q = self.make_queue(dest)
        stats = await self.store.stats(dest.key) if self.store_persistent else None
        if dest in self.queues:  # created while we awaited
            return self.queues[dest]
        q.last_seq = max(stats.last_seq if stats is not None else 0,
                         self._retired_seq.pop(dest, 0))
        self.queues[dest] = q
        if self.store_persistent and not dest.is_temporary:
            await self.store.write([AddDestination(dest.key)])
        self.broker.events.destination_added(dest)
        return q

    def make_queue(self, dest: Destination) -> Queue:
        """A new queue of the type declared for `dest`, else its policy's, else standard."""
        policy = self.policies.entry_for(dest)
        name = self.declared_types.get(dest) or policy.effective_queue_type() or "standard"
        factory = self.queue_types.get(name)
        if factory is None:
            raise DestinationError(f"queue type '{name}' for {dest} is not resolved; known: "
                                   f"{', '.join(sorted(self.queue_types))}")
        q = factory(self, dest, dest.key, policy)
        if not isinstance(q, Queue):
            raise DestinationError(f"queue type '{name}' made {q!r}, which is not a Queue")
        q.queue_type = name
        return q

    async def topic(self, dest: Destination) -> Topic:
        t = self.topics.get(dest)
        if t is None:
            t = self.topics[dest] = Topic(self, dest, self.policies.entry_for(dest))
            self.broker.events.destination_added(dest)
        return t

    def matching_queues(self, pattern: Destination) -> list[Queue]:
        return [q for d, q in self.queues.items() if pattern.matches(d)]

    def matching_topics(self, pattern: Destination) -> list[Topic]:
        return [t for d, t in self.topics.items() if pattern.matches(d)]

    async def delete(self, dest: Destination) -> bool:
        """Delete a destination, its messages and (for a topic) its subscriptions' hold."""
        if dest.is_queue:
            q = self.queues.pop(dest, None)
            if q is None:
                return False
            q.close_all(f"destination {dest} was deleted")
            self._retired_seq[dest] = q.last_seq  # a re-created queue continues numbering
            if self.store_persistent:
                await self.store.write([RemoveDestination(dest.key)])
        else:
            if self.topics.pop(dest, None) is None:
                return False
        self.broker.events.destination_removed(dest)
        return True

    # -- subscriptions ----------------------------------------------------------------
    def add_subscription(self, sub: SubscriptionQueue) -> None:
        if sub.destination.is_wildcard:
            self._wildcard_subs.append(sub)
        else:
            self._topic_subs.setdefault(sub.destination, []).append(sub)
        if sub.durable:
            self.subscriptions[sub.key] = sub
        self._sub_cache.clear()

    def remove_subscription(self, sub: SubscriptionQueue) -> None:
        if sub in self._wildcard_subs:
            self._wildcard_subs.remove(sub)
        subs = self._topic_subs.get(sub.destination)
        if subs and sub in subs:
            subs.remove(sub)
        if sub.durable:
            self.subscriptions.pop(sub.key, None)
        self._sub_cache.clear()
        sub.close_all("subscription removed")

    def subscriptions_for(self, topic: Destination) -> list[SubscriptionQueue]:
        subs = self._sub_cache.get(topic)
        if subs is None:
            subs = list(self._topic_subs.get(topic, ()))
            subs += [s for s in self._wildcard_subs if s.destination.matches(topic)]
            self._sub_cache[topic] = subs
        return subs

    # -- store ---------------------------------------------------------------------------
    async def commit(self, batch: SendBatch) -> None:
        """Write a batch, then make its messages visible."""
        if batch.ops:
            if self.usage.store_limit and self.store.size() >= self.usage.store_limit:
                await self.flow_control(self._wait_store(), None, store=True)
            await self.store.write(batch.ops)
        for queue, entry in batch.placed:
            queue.enqueue(entry)

    def commit_soon(self, batch: SendBatch) -> asyncio.Future[None]:
        """Commit `batch` together with every other batch handed over in this event
        loop turn: one store write (one record, one sync) for all of them, then
        their messages become visible in the order the batches came. The returned
        future completes when this batch is stored."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if not self._pending_commits:
            loop.call_soon(self._flush_commits)
        self._pending_commits.append((batch, fut))
        return fut

    def _flush_commits(self) -> None:
        pending, self._pending_commits = self._pending_commits, []
        if len(pending) == 1:
            merged = pending[0][0]
        else:
            from relaymq.broker.router import SendBatch

            merged = SendBatch()
            for batch, _ in pending:
                merged.absorb(batch)
        task = asyncio.ensure_future(self.commit(merged))

        def done(t: asyncio.Future[None]) -> None:
            error = None if t.cancelled() else t.exception()
            if error is not None:
                merged.abandon()
            for _, fut in pending:
                if fut.done():
                    continue
                if t.cancelled():
                    fut.cancel()
                elif error is not None:
                    fut.set_exception(error)
                else:
                    fut.set_result(None)

        task.add_done_callback(done)

    async def _wait_store(self) -> None:
        """Wait until the store is under `storeUsage`, asking it to reclaim space now
        and saying which destinations hold it."""
        reclaim = getattr(self.store, "reclaim", None)
        report = getattr(self.store, "usage_report", None)
        log.warning("store usage limit (%d bytes) reached; producers wait. %s",
                    self.usage.store_limit, report() if report else self.store.describe())
        while self.store.size() >= self.usage.store_limit:
            if reclaim is not None:
                await reclaim()
                if self.store.size() < self.usage.store_limit:
                    break
            await asyncio.sleep(0.05)

    def store_remove(self, key: str, seq: int) -> Awaitable[None]:
        """Removals from one event-loop turn go to the store as one batch."""
        self._pending_removes.append(RemoveMessage(key, seq))
        fut = self._removes_future
        if fut is None:
            fut = self._removes_future = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(self._flush_removes)
        return fut

    def _flush_removes(self) -> None:
        ops, self._pending_removes = self._pending_removes, []
        fut, self._removes_future = self._removes_future, None
        task = asyncio.ensure_future(self.store.write(ops))

        def done(t: asyncio.Future[None]) -> None:
            if fut is None or fut.done():
                return
            if t.exception() is not None:
                log.error("storing %d acknowledgements failed: %s", len(ops), t.exception())
                fut.set_exception(t.exception())  # type: ignore[arg-type]
            else:
                fut.set_result(None)

        task.add_done_callback(done)

    def _log_store_refusal(self) -> None:
        """Say which destinations hold the store's space when producers are refused
        (at most every 10 s: a refused producer usually retries at once)."""
        now = time.monotonic()
        if now - self._store_refusal_logged < 10.0:
            return
        self._store_refusal_logged = now
        report = getattr(self.store, "usage_report", None)
        log.warning("store usage limit (%d bytes) reached; persistent sends are refused "
                    "(sendFailIfNoSpace). %s", self.usage.store_limit,
                    report() if report else self.store.describe())

    async def flow_control(self, wait: Awaitable[None], dest: Destination | None,
                           store: bool = False) -> None:
        """Wait for space, or refuse at once (`sendFailIfNoSpace`) or after a timeout."""
        what = "store" if store else f"memory of {dest}" if dest else "memory"
        if self.usage.send_fail_if_no_space and not self.usage.send_fail_timeout:
            close = getattr(wait, "close", None)
            if close:
                close()
            if store:
                self._log_store_refusal()
            raise ResourceLimitExceeded(f"usage limit reached ({what}); sendFailIfNoSpace is set")
        if self.usage.send_fail_timeout:
            try:
                await asyncio.wait_for(wait, self.usage.send_fail_timeout)
            except TimeoutError:
                raise ResourceLimitExceeded(
                    f"usage limit reached ({what}) for {self.usage.send_fail_timeout:.1f}s"
                ) from None
        else:
            await wait

    # -- dead letters and expiry -------------------------------------------------------------
    def dead_letter(self, queue: Queue, entry: QueueEntry, reason: str, expired: bool) -> None:
        origin = queue.destination
        strategy = self.policies.dead_letter_strategy(origin)
        msg = entry.message
        dlq = dead_letter_destination(strategy, msg, origin, expired)
        queue.stats.dead_lettered += 1
        self.broker.events.message_dead_lettered(msg, origin, reason)
        if dlq is None or (origin.is_queue and dlq == origin):
            if entry.stored:
                self.store_remove(queue.key, entry.seq)
            return
        copy = dead_letter_copy(strategy, msg, origin, dlq, reason)
        asyncio.get_running_loop().create_task(self._move(queue, entry, copy))

    async def _move(self, queue: Queue, entry: QueueEntry, copy: object) -> None:
        from relaymq.broker.router import SendBatch, SendContext

        batch = SendBatch()
        if entry.stored:
            batch.ops.append(RemoveMessage(queue.key, entry.seq))
        try:
            await self.broker.router.route(SendContext(None, batch), copy)  # type: ignore[arg-type]
            await self.commit(batch)
        except Exception:  # noqa: BLE001 - a failed move must not kill the loop
            log.exception("moving a message from %s to its dead-letter queue failed",
                          queue.destination)

    def message_expired(self, queue: Queue, entry: QueueEntry) -> None:
        self.broker.events.message_expired(entry.message, queue.destination)

    def expire_scan(self) -> int:
        n = 0
        for q in list(self.queues.values()) + list(self.subscriptions.values()):
            if q.policy.expire_messages_period:
                n += q.expire_scan()
        return n

    # -- recovery ------------------------------------------------------------------------------
    async def recover(self) -> None:
        for key in await self.store.destinations():
            dest = Destination.parse(key)
            if dest.is_temporary:
                continue
            if dest.is_queue:
                q = await self.queue(dest)
                count = await q.recover()
                self.broker.events.persistence_recovered(dest, count)
            else:
                await self.topic(dest)
