"""A client's connection as the kernel sees it; what every transport calls.

```python
conn = await broker.connect(ConnectRequest(username=.., client_id=.., transport="stomp"))
await conn.send(message)                        # returns once accepted (stored if durable)
consumer = await conn.subscribe(Destination.queue("A"), selector="x > 1", prefetch=10)
consumer.on_message = write_to_client          # then settle: consumer.ack(delivery.id)
await conn.close()                              # unacked deliveries return, temps go away
```
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

from relaymq.broker.chain import SendChain
from relaymq.broker.events import BrokerEvents
from relaymq.broker.region import Region
from relaymq.broker.security import Principal
from relaymq.broker.transactions import LocalTransaction
from relaymq.broker.usage import SystemUsage
from relaymq.dispatch.batch import DONE, SendBatch, SendContext
from relaymq.dispatch.consumer import Consumer, Delivery
from relaymq.dispatch.policy import PolicyMap
from relaymq.dispatch.topic import SubscriptionQueue
from relaymq.errors import (
    DestinationError,
    SecurityError,
    SubscriptionInUse,
    TransactionError,
)
from relaymq.feed.events import SubscriptionCreated, SubscriptionDeleted
from relaymq.management import Management
from relaymq.model.destination import Destination, DestinationKind
from relaymq.model.message import Message, MessageIdGenerator
from relaymq.selector import Selector
from relaymq.spi.persistence import (
    AddSubscription,
    RemoveSubscription,
    SubscriptionRecord,
    subscription_key,
)

_ids = itertools.count(1)
#: the message property that carries a cron schedule (`broker.scheduler`), and its encoded name
SCHEDULED_CRON: Final = "AMQ_SCHEDULED_CRON"
SCHEDULED_CRON_MARKER: Final = SCHEDULED_CRON.encode()


def asks_scheduling(message: Message) -> bool:
    """Whether `message` asks for scheduled delivery: a scheduling field set or an
    `AMQ_SCHEDULED_CRON` property. Every send asks this when `schedulerSupport` is on,
    so it lives in this (compiled) module; the property check looks for the encoded
    name before parsing lazily loaded properties."""
    return bool(message.scheduled_delay or message.scheduled_period
                or message.scheduled_repeat
                or message.peek_property(SCHEDULED_CRON, SCHEDULED_CRON_MARKER) is not None)
#: how refusals name an action, as ActiveMQ's ("User x is not authorized to write to: ...")
_VERBS: Final = {"read": "read from", "write": "write to", "admin": "create"}


class Scheduling(Protocol):
    """The broker's scheduler as a connection's sends see it (`broker.scheduler.Scheduler`)."""

    def wants(self, message: Message) -> bool: ...

    def schedule(self, message: Message, connection: ClientConnection,
                 duplicate_id: str | None = None) -> asyncio.Future[None] | None: ...


class ConnectionHost(Protocol):
    """What connections (and the scheduler sending for them) need of the broker
    (`broker.broker.Broker` is the one implementation). A protocol, so this module
    stays below the broker that creates connections."""

    @property
    def region(self) -> Region: ...
    @property
    def usage(self) -> SystemUsage: ...
    @property
    def send_chain(self) -> SendChain: ...
    @property
    def scheduler(self) -> Scheduling | None: ...
    @property
    def events(self) -> BrokerEvents: ...
    @property
    def policies(self) -> PolicyMap: ...
    @property
    def message_ids(self) -> MessageIdGenerator: ...
    @property
    def management(self) -> Management: ...

    def authorize(self, principal: Principal, action: str, destination: Destination,
                  connection: ClientConnection | None = None) -> bool: ...

    def make_durable(self, record: SubscriptionRecord,
                     selector: Selector | None) -> SubscriptionQueue: ...

    def internal_connection(self) -> ClientConnection: ...

    def connection_closed(self, conn: ClientConnection) -> None: ...

    def register_temporary(self, dest: Destination, owner: ClientConnection) -> None: ...

    def temporary_owner(self, dest: Destination) -> ClientConnection | None: ...

    def reclaim_temporary(self, dest: Destination, conn: ClientConnection) -> None: ...

    async def delete_temporary(self, dest: Destination, *, now: bool = False) -> None: ...


class ClientConnection:
    def __init__(self, broker: ConnectionHost, principal: Principal, client_id: str | None,
                 transport: str = "vm", remote_address: str | None = None,
                 network: bool = False, origin: str | None = None) -> None:
        self.broker = broker
        # the broker's parts the per-message path uses, held natively typed (they are
        # made before any connection and stay for the broker's life)
        self._region = broker.region
        self._usage = broker.usage
        self._chain = broker.send_chain
        self._scheduler = broker.scheduler
        self.principal = principal
        self.client_id = client_id
        self.transport = transport
        self.remote_address = remote_address
        self.network = network
        #: the broker id of the peer (mirror, federation) this connection speaks for;
        #: its sends carry it (`Message.origin`) and so do their change-feed events
        self.origin = origin
        self.id = f"{broker.message_ids.connection_prefix()}"
        #: message ids this connection gives are `message_id_prefix` + the next of
        #: `message_numbers` (transports that render ids themselves use both)
        self.message_numbers = itertools.count(1)
        self.message_id_prefix = f"{self.id}:-1:1:"
        self.consumers: dict[int, Consumer] = {}
        self.temporary: list[Destination] = []
        self.transactions: dict[str, LocalTransaction] = {}
        self._authorized: set[tuple[str, Destination]] = set()
        self._can_write: set[Destination] = set()
        self._producers: list[Destination] = []
        #: `populateJMSXUserID`: every sent message's user id is this connection's user
        #: (not on network bridges, nor the broker's own re-sends: they carry the original)
        self.populate_user_id = bool(getattr(getattr(broker, "config", None), "populate_jmsx_user_id",
                                        False)) and not network and not principal.system
        self.closed = False
        self._subs: dict[int, SubscriptionQueue] = {}  # non-durable topic subscriptions
        #: set by transports: close the client's connection with this reason
        #: (management's `close_connection`)
        self.on_close_request: Callable[[str], Any] | None = None
        self._stored: asyncio.Future[None] | None = None  # this connection's last store write
        #: sends of this connection dropped by duplicate detection (a mirror target's
        #: repeats); counted on the duplicate path only
        self.duplicates = 0

    @property
    def user(self) -> str | None:
        return None if self.principal.anonymous else self.principal.name

    # -- security ---------------------------------------------------------------
    def authorize(self, action: str, destination: Destination) -> None:
        """Raise `SecurityError` unless the principal may `action` `destination`;
        answers are remembered until `forget_authorizations`."""
        key = (action, destination)
        if key in self._authorized:
            return
        if not self.broker.authorize(self.principal, action, destination, self):
            raise SecurityError(
                f"User {self.principal.name} is not authorized to "
                f"{_VERBS.get(action, action)}: {destination}"
            )
        self._authorized.add(key)

    def authorize_create(self, destination: Destination) -> None:
        """`admin` on each (part of a) destination this operation would create,
        as ActiveMQ asks when a first send or subscribe makes a destination."""
        if destination.is_wildcard:
            return  # a wildcard creates nothing
        region = self._region
        parts = destination.composite_parts() if destination.is_composite else (destination,)
        for part in parts:
            if part.is_wildcard or part.is_temporary:
                continue  # temporary destinations are made by create_temporary
            if part not in (region.queues if part.is_queue else region.topics):
                self.authorize("admin", part)

    def forget_authorizations(self) -> None:
        """Drop remembered authorization answers (users, groups or entries changed)."""
        self._authorized.clear()
        self._can_write.clear()

    # -- producing -----------------------------------------------------------------
    def new_message_id(self) -> str:
        return self.message_id_prefix + str(next(self.message_numbers))

    async def send(self, message: Message, txid: str | None = None) -> None:
        """Route `message`; returns when it is accepted (stored when durable)."""
        stored = await self.submit(message, txid)
        if stored is not None:
            await stored

    async def submit(self, message: Message, txid: str | None = None,
                     duplicate_id: str | None = None) -> Awaitable[None] | None:
        """Route `message` and hand its store work to the store; return an awaitable
        that completes when it is accepted (stored), or None when it already is.
        `duplicate_id`: the send's duplicate-detection id, given apart from the
        message (a mirror target's): checked as `_AMQ_DUPL_ID` would be, not added
        to the message's properties (a message scheduled once keeps it with its
        job, checked when its copy is routed; a repeating or cron job's is
        checked once, when the job is taken).

        Transports that pipeline (AMQP unsettled transfers, STOMP SENDs with
        receipts) call this for each message in arrival order and settle each one
        when its awaitable completes: routing order, and so per-producer FIFO, is
        fixed here, while the store merges the waits into one sync. This is the
        per-message path of every transport: keep it lean."""
        if self.closed:
            raise DestinationError("connection is closed")
        dest = message.destination
        if dest is None:
            raise DestinationError("a message needs a destination")
        if dest not in self._can_write:
            self.authorize("write", dest)
            self.authorize_create(dest)
            self._can_write.add(dest)
        if dest.is_temporary and self.broker.temporary_owner(dest) is None:
            # gone with its connection (ActiveMQ refuses the send too); checked per
            # message, since a producer may outlive the queue
            raise DestinationError(f"temporary destination {dest} does not exist")
        if message.message_id is None:
            message.message_id = self.message_id_prefix + str(next(self.message_numbers))
        if not message.timestamp:
            message.timestamp = time.time_ns() // 1_000_000
        message.producer_id = self.id
        if self.populate_user_id:
            message.user_id = self.user  # not what the sender claims
        if self.origin is not None and message.origin is None:
            message.origin = self.origin
        memory = self._usage.memory
        if memory.used >= memory.limit and not (message.durable and self._region.store_persistent):
            await self._region.flow_control(memory.wait(), dest)
        scheduler = self._scheduler
        if scheduler is not None and asks_scheduling(message):  # stored first when persistent
            # a duplicate id given apart stays apart (`Scheduler.schedule` checks it)
            return scheduler.schedule(message, self, duplicate_id)
        batch = SendBatch()
        txn = None
        if txid is not None:
            txn = self.transactions.get(txid)
            if txn is None:
                raise TransactionError(f"unknown transaction {txid}")
        try:
            routed = self._chain.call(SendContext(self, batch, txn is not None, self.network, None,
                                              self.origin, duplicate_id), message)
            if routed is not DONE:
                await routed
        except BaseException:
            batch.abandon()  # nothing of a failed send becomes visible
            raise
        if txn is not None:
            txn.add_batch(batch)
            return None
        region = self._region
        feed = region.feed
        last = self._stored
        stores = bool(batch.ops)
        if stores or feed.capture_added or (last is not None and not last.done()):
            # Stored, or after this connection's writes still under way (its
            # messages keep their order), or captured by a durable feed cursor.
            # (A send the writer refuses abandons its batch: its future fails.)
            stored = self._stored = region.writer.commit_soon(batch)
            return stored if stores else None
        if feed.watch_added:
            region.writer.publish_visible(batch)
            return None
        for queue, entry in batch.placed:
            queue.enqueue(entry)
        return None

    async def add_producer(self, destination: Destination) -> None:
        """Count a producer attached to `destination` (AMQP sender link, JMS producer);
        sending does not need it, the `producers` counter does."""
        self.authorize("write", destination)
        self.authorize_create(destination)
        target = await self._stats_target(destination)
        if target is not None:
            target.stats.producers += 1
            self._producers.append(destination)
            self.broker.events.producer_added(self, destination)

    async def remove_producer(self, destination: Destination) -> None:
        if destination in self._producers:
            self._producers.remove(destination)
            target = await self._stats_target(destination)
            if target is not None:
                target.stats.producers -= 1
            self.broker.events.producer_removed(self, destination)

    @property
    def producers(self) -> list[Destination]:
        """Where this connection's producers send (one entry per producer)."""
        return list(self._producers)

    def request_close(self, reason: str) -> None:
        """Management asks this connection to close: the transport's
        `on_close_request` (an ERROR frame, an AMQP close) ends it with `reason`;
        without one, only the kernel side closes."""
        callback = self.on_close_request
        if callback is not None:
            callback(reason)

    async def _stats_target(self, destination: Destination):  # type: ignore[no-untyped-def]
        if destination.is_wildcard or destination.is_composite:
            return None
        region = self._region
        if destination.is_queue:
            return await region.queue(destination)
        return await region.topic(destination)

    # -- consuming -------------------------------------------------------------------
    async def subscribe(
        self,
        destination: Destination,
        *,
        selector: str | None = None,
        prefetch: int | None = None,
        credit_mode: bool = False,
        exclusive: bool = False,
        browser: bool = False,
        durable_name: str | None = None,
        no_local: bool = False,
        priority: int = 0,
        name: str | None = None,
        selector_string_conversion: bool = False,
        on_message: Callable[[Delivery], Any] | None = None,
        on_browse_end: Callable[[], Any] | None = None,
    ) -> Consumer:
        """Create a consumer; an invalid selector raises `InvalidSelector` here.

        `on_message` receives each `Delivery` synchronously (write it out, do not
        block). A window consumer (the default) receives at once; a `credit_mode`
        consumer receives after `add_credit`. A browser gets the queue's messages
        at subscribe time, then `on_browse_end`."""
        if self.closed:
            raise DestinationError("connection is closed")
        compiled = (Selector.compile(selector, string_conversion=selector_string_conversion)
                    if selector and selector.strip() else None)
        self.authorize("read", destination)
        self.authorize_create(destination)
        broker = self.broker
        if prefetch is None:
            prefetch = broker.policies.prefetch_for(destination, durable_name is not None, browser)
        consumer = Consumer(
            self, destination, selector=compiled, prefetch=prefetch, credit_mode=credit_mode,
            exclusive=exclusive, browser=browser, durable_name=durable_name, no_local=no_local,
            priority=priority, name=name, network=self.network,
        )
        if on_message is not None:
            consumer.on_message = on_message
        consumer.on_browse_end = on_browse_end
        if destination.is_temporary and destination not in self.temporary:
            owner = broker.temporary_owner(destination)
            if owner is None:
                raise DestinationError(f"temporary destination {destination} does not exist")
            if owner.closed:  # an anonymous queue waiting for its client to come back
                broker.reclaim_temporary(destination, self)
        if destination.is_queue:
            if destination.is_wildcard or destination.is_composite:
                shape = "a wildcard" if destination.is_wildcard else "a composite destination"
                raise DestinationError(
                    f"{destination} is {shape}: a consumer reads one queue; subscribe to each "
                    f"queue (a STOMP SUBSCRIBE accepts both and makes one consumer per queue)")
            if durable_name is not None:
                raise DestinationError("a durable subscription needs a topic, not a queue")
            queue = await self._region.queue(destination)
            self.consumers[consumer.id] = consumer
            queue.add_consumer(consumer)
        elif durable_name is not None:
            sub = await self._durable(destination, durable_name, compiled, no_local)
            if any(not c.closed for c in sub.consumers):
                raise SubscriptionInUse(
                    f"durable subscription {durable_name!r} of client {self.client_id} "
                    f"already has a consumer"
                )
            consumer.selector = None  # applied when published
            self.consumers[consumer.id] = consumer
            sub.add_consumer(consumer)
        else:
            if browser:
                raise DestinationError("browsing needs a queue")
            sub = SubscriptionQueue(
                self._region, destination, f"sub://{consumer.id}",
                broker.policies.entry_for(destination), compiled,
                no_local_connection=self.id if no_local else None,
            )
            consumer.selector = None
            self._subs[consumer.id] = sub
            self._region.add_subscription(sub)
            self.consumers[consumer.id] = consumer
            sub.add_consumer(consumer)
        broker.events.consumer_added(consumer)
        return consumer

    async def _durable(self, topic: Destination, name: str, selector: Selector | None,
                       no_local: bool) -> SubscriptionQueue:
        if not self.client_id:
            raise DestinationError("a durable subscription needs a client id")
        region = self._region
        key = subscription_key(self.client_id, name)
        sub = region.subscriptions.get(key)
        text = selector.text if selector else None
        if sub is not None and sub.record is not None and (
            sub.record.topic != topic.key or sub.record.selector != text
            or sub.record.no_local != no_local
        ):
            if any(not c.closed for c in sub.consumers):
                raise SubscriptionInUse(f"durable subscription {name!r} is in use")
            self._check_durable_keys(key, topic)  # before the old one is dropped
            # ActiveMQ semantics: a changed topic or selector replaces the subscription.
            await self._drop_durable(sub)
            sub = None
        if sub is None:
            self._check_durable_keys(key, topic)
            record = SubscriptionRecord(self.client_id, name, topic.key, text, no_local)
            sub = self.broker.make_durable(record, selector)
            ops = [AddSubscription(record)] if region.store_persistent else []
            await region.writer.write(ops, (SubscriptionCreated(
                record.key, record.client_id, name, topic, text, no_local, False, self.origin),))
            region.add_subscription(sub)
        else:
            sub.no_local_connection = self.id if no_local else None
        return sub

    def _check_durable_keys(self, key: str, topic: Destination) -> None:
        """Refuse a new durable subscription whose key, or its topic's, the store
        cannot hold (both are stored with it), before anything is made."""
        region = self._region
        region.check_key(key, "the durable subscription", "durable://CLIENT_ID:NAME")
        region.check_name(topic)

    async def _drop_durable(self, sub: SubscriptionQueue) -> None:
        region = self._region
        region.remove_subscription(sub)
        ops = [RemoveSubscription(sub.key)] if region.store_persistent else []
        record = sub.record
        events = (SubscriptionDeleted(sub.key, record.client_id, record.name, sub.destination,
                                      self.origin),) if record is not None else ()
        await region.writer.write(ops, events)

    async def unsubscribe(self, name: str) -> None:
        """Remove a durable subscription; refused while a consumer is attached."""
        if not self.client_id:
            raise DestinationError("unsubscribe needs a client id")
        sub = self._region.subscriptions.get(subscription_key(self.client_id, name))
        if sub is None:
            raise DestinationError(f"no durable subscription {name!r} for client {self.client_id}")
        if any(not c.closed for c in sub.consumers):
            raise SubscriptionInUse("Durable consumer is in use")
        await self._drop_durable(sub)

    def close_consumer(self, consumer: Consumer) -> None:
        self.consumers.pop(consumer.id, None)
        consumer.close()
        sub = self._subs.pop(consumer.id, None)
        if sub is not None:
            self._region.remove_subscription(sub)
        self.broker.events.consumer_removed(consumer)

    # -- temporary destinations --------------------------------------------------------
    def create_temporary(self, kind: DestinationKind = DestinationKind.TEMP_QUEUE,
                         name: str | None = None) -> Destination:
        if kind not in (DestinationKind.TEMP_QUEUE, DestinationKind.TEMP_TOPIC):
            raise DestinationError(f"{kind} is not a temporary kind")
        dest = Destination(kind, name or f"{self.id}:{len(self.temporary) + 1}")
        self.authorize("admin", dest)
        self.temporary.append(dest)
        self.broker.register_temporary(dest, self)
        return dest

    # -- transactions ------------------------------------------------------------------
    def begin(self, txid: str) -> LocalTransaction:
        if txid in self.transactions:
            raise TransactionError(f"transaction {txid} already exists")
        txn = self.transactions[txid] = LocalTransaction(txid, self._region)
        return txn

    def transaction(self, txid: str) -> LocalTransaction:
        txn = self.transactions.get(txid)
        if txn is None:
            raise TransactionError(f"unknown transaction {txid}")
        return txn

    async def commit(self, txid: str) -> None:
        txn = self.transaction(txid)
        del self.transactions[txid]
        await txn.commit()

    def rollback(self, txid: str) -> None:
        txn = self.transaction(txid)
        del self.transactions[txid]
        txn.rollback()

    # -- lifecycle ----------------------------------------------------------------------
    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for txn in list(self.transactions.values()):
            txn.rollback()
        self.transactions.clear()
        for consumer in list(self.consumers.values()):
            self.close_consumer(consumer)
        for dest in list(self._producers):
            await self.remove_producer(dest)
        for dest in self.temporary:
            await self.broker.delete_temporary(dest)
        self.temporary.clear()
        self.broker.connection_closed(self)
