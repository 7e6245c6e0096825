"""The broker's destinations: creation, lookup (wildcards), deletion, recovery.

Also the services queues need from the broker: the store-write path
(`self.writer`, broker/writer.py), dead-lettering, expiry events and flow control.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from relaymq.broker.declarations import DECLARED_PREFIX, QueueDeclarations
from relaymq.broker.events import BrokerEvents
from relaymq.broker.usage import SystemUsage
from relaymq.broker.writer import StoreWriter
from relaymq.dispatch.batch import SendBatch, SendContext
from relaymq.dispatch.consumer import QueueBase
from relaymq.dispatch.deadletter import dead_letter_copy, dead_letter_destination
from relaymq.dispatch.entry import QueueEntry
from relaymq.dispatch.policy import PolicyMap
from relaymq.dispatch.queue import Queue
from relaymq.dispatch.redelivery import RedeliveryPolicyMap
from relaymq.dispatch.services import QueueServices
from relaymq.dispatch.topic import SubscriptionQueue, Topic, TopicSubscriptions
from relaymq.errors import DestinationError, DestinationNameError, ResourceLimitExceeded
from relaymq.feed.constructors import removed
from relaymq.feed.cursor import CURSOR_PREFIX
from relaymq.feed.events import DestinationCreated, DestinationDeleted, RemovalReason
from relaymq.feed.feed import ChangeFeed
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import (
    MAX_KEY_BYTES,
    AddDestination,
    KeyUnit,
    PersistenceAdapter,
    RemoveDestination,
    RemoveMessage,
    key_length,
)

log = logging.getLogger("relaymq.region")


#: how the region routes a message it moves (the broker's interceptor chain end, `Router.route`)
Route = Callable[[SendContext, Message], Awaitable[None]]


class Region(QueueServices):
    def __init__(self, events: BrokerEvents, store: PersistenceAdapter, policies: PolicyMap,
                 usage: SystemUsage, feed: ChangeFeed | None = None) -> None:
        self.events = events
        #: set by the broker once its router exists (dead-letter moves are routed)
        self.route: Route | None = None
        self.store = store
        self.feed = feed if feed is not None else ChangeFeed()
        self.writer = StoreWriter(store, self.feed, lambda: usage.store_limit, self._store_space)
        self.store_persistent = store.persistent
        self.policies = policies
        self.usage = usage
        self.redelivery: RedeliveryPolicyMap | None = None
        self.queues: dict[Destination, Queue] = {}
        #: queues being created (their store write under way): the others asking wait
        self._creating: dict[Destination, asyncio.Future[None]] = {}
        self.topics: dict[Destination, Topic] = {}
        self.subscriptions: dict[str, SubscriptionQueue] = {}  # by key
        self.topic_subscriptions = TopicSubscriptions()
        self._retired_seq: dict[Destination, int] = {}
        self._store_refusal_logged = -1e9  # monotonic time of the last "refused" log line
        #: queue type name -> factory (`relaymq.queue_types`); the broker adds the
        #: types its configuration names, management the ones it is asked for
        self.queue_types: dict[str, Callable[..., Queue]] = {"standard": Queue}
        #: queues declared with a type (`<queue queueType=..>`, management)
        self.declared_types: dict[Destination, str] = {}
        #: types and settings declared through management, kept in the store
        self.declarations = QueueDeclarations(self)

    # -- destinations -----------------------------------------------------------------
    async def queue(self, dest: Destination, *, origin: str | None = None,
                    recovered: bool = False) -> Queue:
        """The queue `dest`, created (and stored) when it does not exist yet;
        `origin`: the peer broker whose send creates it (None: local).

        Callers that ask while another is creating it get it once that creation is
        done, in the order they asked, after the caller that creates it: the first
        consumer of a new queue is bound first (an exclusive queue's active one)."""
        q = self.queues.get(dest)
        if q is not None and dest not in self._creating:
            return q
        creating = self._creating.get(dest)
        if creating is not None:
            await creating
            q = self.queues.get(dest)
            if q is not None:
                return q
            return await self.queue(dest, origin=origin, recovered=recovered)  # it failed
        self.check_name(dest)
        creating = self._creating[dest] = asyncio.get_running_loop().create_future()
        try:
            q = self.make_queue(dest)
            stats = await self.store.stats(dest.key) if self.store_persistent else None
            q.last_seq = max(stats.last_seq if stats is not None else 0,
                             self._retired_seq.pop(dest, 0))
            self.queues[dest] = q
            ops = [AddDestination(dest.key)] if (
                self.store_persistent and not dest.is_temporary and not recovered) else []
            try:
                await self.writer.write(ops, (DestinationCreated(dest, recovered, origin),))
            except BaseException:
                del self.queues[dest]  # not stored: not made
                raise
            self.events.destination_added(dest, recovered)
            return q
        finally:
            # the waiting callers resume after this one has used the queue
            del self._creating[dest]
            creating.set_result(None)

    def check_name(self, dest: Destination) -> None:
        """Refuse (`DestinationNameError`) a destination whose key the store cannot
        hold (`check_key`), before anything is made. Every creation comes here:
        management's, a first send or subscribe of any protocol, recovery."""
        self.check_key(dest.key, "the name of", f"{dest.key.partition('://')[0]}://NAME")

    def check_key(self, key: str, what: str = "the key", form: str = "") -> None:
        """Refuse (`DestinationNameError`) a destination or durable subscription key
        longer than the store holds: `PersistenceAdapter.max_key_length`, counted in
        its `max_key_unit` (UTF-8 bytes or characters), and never more than
        `MAX_KEY_BYTES` bytes. The message names the key (`what`, as `form`), its
        length and the limit, each in the unit that limit counts."""
        store = self.store
        limits = [(int(getattr(store, "max_key_length", MAX_KEY_BYTES)),
                   str(getattr(store, "max_key_unit", KeyUnit.BYTES)))]
        legacy = getattr(store, "max_key_bytes", None)  # the older, bytes-only name
        if legacy is not None:
            limits.append((int(legacy), KeyUnit.BYTES))
        limits.append((MAX_KEY_BYTES, KeyUnit.BYTES))
        for limit, unit in limits:
            size = key_length(key, unit)
            if size > limit:
                as_form = f" as {form}" if form else ""
                encoding = " in UTF-8" if unit == KeyUnit.BYTES else ""
                raise DestinationNameError(
                    f"{what} {key[:40]}... is too long: {size} {unit}{as_form}{encoding}, "
                    f"and the store ({type(store).__name__}) holds at most {limit} {unit}")

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

    async def topic(self, dest: Destination, *, origin: str | None = None,
                    recovered: bool = False) -> Topic:
        t = self.topics.get(dest)
        if t is None:
            self.check_name(dest)
            t = self.topics[dest] = Topic(self.topic_subscriptions, dest, self.policies.entry_for(dest))
            self.writer.note(DestinationCreated(dest, recovered, origin))
            self.events.destination_added(dest, recovered)
        return t

    def matching_queues(self, pattern: Destination) -> list[Queue]:
        return [q for d, q in self.queues.items() if pattern.matches(d)]

    def matching_topics(self, pattern: Destination) -> list[Topic]:
        return [t for d, t in self.topics.items() if pattern.matches(d)]

    async def delete(self, dest: Destination, *, origin: str | None = None) -> bool:
        """Delete a destination, its messages and (for a topic) its subscriptions' hold."""
        event = DestinationDeleted(dest, origin)
        if dest.is_queue:
            q = self.queues.pop(dest, None)
            if q is None:
                return False
            q.close_all(f"destination {dest} was deleted")
            self._retired_seq[dest] = q.last_seq  # a re-created queue continues numbering
            ops = [RemoveDestination(dest.key)] if self.store_persistent else []
            await self.writer.write(ops, (event,))
            await self.declarations.forget(dest)
        else:
            if self.topics.pop(dest, None) is None:
                return False
            self.writer.note(event)
        self.events.destination_removed(dest)
        return True

    # -- subscriptions ----------------------------------------------------------------
    def add_subscription(self, sub: SubscriptionQueue) -> None:
        self.topic_subscriptions.add(sub)
        if sub.durable:
            self.subscriptions[sub.key] = sub

    def remove_subscription(self, sub: SubscriptionQueue) -> None:
        self.topic_subscriptions.remove(sub)
        if sub.durable:
            self.subscriptions.pop(sub.key, None)
        sub.close_all("subscription removed")

    def subscriptions_for(self, topic: Destination) -> list[SubscriptionQueue]:
        return self.topic_subscriptions.of(topic)

    # -- store ---------------------------------------------------------------------------
    # Every store write goes through `self.writer` (broker/writer.py).

    async def _store_space(self) -> None:
        """Wait for the store to be under `storeUsage`, or refuse (`sendFailIfNoSpace`)."""
        await self.flow_control(self._wait_store(), None, store=True)

    async def _wait_store(self) -> None:
        """Wait until the store is under `storeUsage`, asking it to reclaim space now
        and saying which destinations hold it."""
        store = self.store
        log.warning("store usage limit (%d bytes) reached; producers wait. %s",
                    self.usage.store_limit, store.usage_report())
        while await store.current_size() >= self.usage.store_limit:
            await store.reclaim()
            if await store.current_size() < self.usage.store_limit:
                break
            await asyncio.sleep(0.05)

    def _log_store_refusal(self) -> None:
        """Say which destinations hold the store's space when producers are refused
        (at most every 10 s: a refused producer usually retries at once)."""
        now = time.monotonic()
        if now - self._store_refusal_logged < 10.0:
            return
        self._store_refusal_logged = now
        log.warning("store usage limit (%d bytes) reached; persistent sends are refused "
                    "(sendFailIfNoSpace). %s", self.usage.store_limit, self.store.usage_report())

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
    def dead_letter(self, queue: QueueBase, entry: QueueEntry, reason: str, expired: bool) -> None:
        origin = queue.destination
        strategy = self.policies.dead_letter_strategy(origin)
        msg = entry.message
        dlq = dead_letter_destination(strategy, msg, origin, expired)
        queue.stats.dead_lettered += 1
        self.events.message_dead_lettered(msg, origin, reason)
        why = RemovalReason.EXPIRED if expired else RemovalReason.KILLED
        if dlq is None or (origin.is_queue and dlq == origin):
            self.writer.remove(queue, entry, why)
            return
        durable = isinstance(queue, SubscriptionQueue) and queue.durable
        copy = dead_letter_copy(strategy, msg, origin, dlq, reason,
                                queue.key if durable else None)
        asyncio.get_running_loop().create_task(self._move(queue, entry, copy, why))

    async def redeliver_to(self, sub: SubscriptionQueue, message: Message) -> None:
        """Put `message` on the subscription `sub` alone (a dead letter retried to
        where it came from), stored with it in one batch."""
        batch = SendBatch()
        sub.prepare(message, batch)
        await self.writer.commit(batch)

    async def _move(self, queue: QueueBase, entry: QueueEntry, copy: Message, why: str) -> None:
        """Remove `entry` and route `copy` (to the dead-letter queue) in one store batch."""
        batch = SendBatch()
        if entry.stored:
            batch.ops.append(RemoveMessage(queue.key, entry.seq))
        if self.feed.watch_removed:
            batch.events = [removed(entry.message, queue.destination, queue.key, entry.seq, why,
                                    None)]
        try:
            assert self.route is not None, "the broker sets Region.route at start-up"
            await self.route(SendContext(None, batch), copy)
            await self.writer.commit(batch)
        except Exception:  # noqa: BLE001 - a failed move must not kill the loop
            log.exception("moving a message from %s to its dead-letter queue failed",
                          queue.destination)

    def message_expired(self, queue: QueueBase, entry: QueueEntry) -> None:
        self.events.message_expired(entry.message, queue.destination)

    def expire_scan(self) -> int:
        n = 0
        for q in list(self.queues.values()) + list(self.subscriptions.values()):
            if q.policy.expire_messages_period:
                n += q.expire_scan()
        return n

    # -- recovery ------------------------------------------------------------------------------
    async def recover(self) -> None:
        for key in await self.store.destinations():
            if key.startswith(CURSOR_PREFIX) or key.startswith(DECLARED_PREFIX):
                continue  # a change-feed cursor (the feed reopens those), declarations
            dest = Destination.parse(key)
            if dest.is_temporary:
                continue
            if dest.is_queue:
                q = await self.queue(dest, recovered=True)
                count = await q.recover()
                self.events.persistence_recovered(dest, count)
            else:
                await self.topic(dest, recovered=True)
