"""`Management`: the one documented way to see and change broker state.

Plugins, the console and the CLI use ``broker.management`` instead of kernel
internals (`broker.region` and friends are private and change). Every method is
documented in docs/management.md, and a test fails when one is not. Methods that
touch the store are ``async``; cheap lookups are plain methods.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from relaymq.dispatch.deadletter import (
    DLQ_DELIVERY_FAILURE_CAUSE,
    ORIGINAL_DESTINATION,
    ORIGINAL_EXPIRATION,
    ORIGINAL_SUBSCRIPTION,
)
from relaymq.dispatch.queue import Queue
from relaymq.errors import DestinationError, StateConflict
from relaymq.feed.events import DestinationConfigured, RemovalReason, SubscriptionDeleted
from relaymq.management.browse import browse_page, message_info, scan
from relaymq.management.connections import BrokerConnections, IncomingConnections
from relaymq.management.events import EventRelay, Listener
from relaymq.management.info import (
    BrokerConnectionInfo,
    BrowsePage,
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    IncomingBrokerConnectionInfo,
    MessageInfo,
    ProducerInfo,
    Rates,
    Relocated,
    SubscriptionInfo,
)
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.selector import Selector
from relaymq.spi.persistence import RemoveSubscription, subscription_key


class _Sender(Protocol):
    """What a copy, move or retry sends with (the broker's `operation_connection`)."""

    duplicates: int

    async def send(self, message: Message, txid: str | None = None) -> None: ...


Target = Destination | str


def _destination(target: Target) -> Destination:
    if isinstance(target, Destination):
        return target
    return Destination.parse(target) if "://" in target else Destination.queue(target)


async def _landed(sender: _Sender, message: Message) -> bool:
    """Send `message` with `sender` (a connection of one operation's own); False
    when duplicate detection dropped it."""
    before = sender.duplicates
    await sender.send(message)
    return sender.duplicates == before


def _plain_queue(to: Target, what: str) -> Destination:
    """`to` as one plain queue (ActiveMQ's moveMessageTo and Artemis' moveMessages
    take a queue name): a wildcard, a composite, a topic, a temporary queue or a
    durable subscription is refused (ValueError: a bad argument), never fanned out
    or dropped."""
    try:
        dest = _destination(to)
    except ValueError as exc:
        raise ValueError(f"{what}: {to}: {exc}") from None
    if (not dest.is_queue or dest.is_wildcard or dest.is_composite or dest.is_temporary
            or "://" in dest.name):
        raise ValueError(f"{what} needs one plain queue as its target, not {to}")
    return dest


class Management:
    """The broker's management facade (``broker.management``)."""

    def __init__(self, broker: Any) -> None:
        self._broker = broker
        self._relay: EventRelay | None = None
        self._last: dict[str, tuple[float, int, int]] = {}
        self._queues_view: Mapping[Destination, Any] | None = None
        self._connections = BrokerConnections(broker)
        self._incoming = IncomingConnections()
        #: one message operation (move, copy, remove, purge) at a time per queue: two
        #: moves of the same messages must not both send them
        self._busy: dict[str, asyncio.Lock] = {}

    # -- lookups (synchronous) -------------------------------------------------------
    @property
    def _region(self) -> Any:
        region = self._broker.region
        if region is None:
            raise DestinationError("the broker is not started")
        return region

    @property
    def queues(self) -> Mapping[Destination, Any]:
        """A read-only live view of the queues by destination (cheap: for per-message
        lookups such as virtual-topic fan-out). Values are `relaymq.dispatch.queue.Queue`."""
        view = self._queues_view
        if view is None:
            view = self._queues_view = MappingProxyType(self._region.queues)
        return view

    def queue(self, target: Target) -> Any | None:
        """The live queue of `target` (a `Queue`), or None when it does not exist."""
        return self._region.queues.get(_destination(target))

    def matching_queues(self, pattern: Target) -> list[Destination]:
        """Existing, non-temporary queues whose names match `pattern` (wildcards `*`, `>`)."""
        wanted = _destination(pattern)
        return [d for d in self._region.queues if not d.is_temporary and wanted.matches(d)]

    @property
    def persistent(self) -> bool:
        """True when the store keeps messages across restarts."""
        store = self._broker.store
        return bool(store is not None and store.persistent)

    def store_size(self) -> int:
        """Bytes the store uses now (what `storeUsage` limits); 0 when unknown."""
        store = self._broker.store
        return store.size() if store is not None else 0

    def store_limit(self) -> int:
        """The `storeUsage` limit in bytes (0: none)."""
        return int(self._broker.usage.store_limit or 0)

    def consumer_count(self, target: Target) -> int:
        """Consumers on a queue, or on all subscriptions of a topic."""
        dest = _destination(target)
        region = self._region
        if dest.is_queue:
            q = region.queues.get(dest)
            return q.stats.consumers if q is not None else 0
        return sum(s.stats.consumers for s in region.subscriptions_for(dest))

    def has_subscribers(self, target: Target) -> bool:
        """True when a subscription (durable or not, wildcards included) would receive
        a message published to the topic `target` now."""
        return bool(self._region.subscriptions_for(_destination(target)))

    def producer_count(self, target: Target) -> int:
        dest = _destination(target)
        region = self._region
        holder = region.queues.get(dest) if dest.is_queue else region.topics.get(dest)
        return holder.stats.producers if holder is not None else 0

    # -- listing -----------------------------------------------------------------------
    async def destinations(self, kind: str | None = None) -> list[DestinationInfo]:
        """Queues, topics and durable subscriptions with their statistics; `kind`
        (``queue``, ``topic``, ``subscription``) narrows the list."""
        region = self._region
        out: list[DestinationInfo] = []
        if kind in (None, "queue"):
            for q in list(region.queues.values()):
                out.append(await self._info(q, "queue"))
        if kind in (None, "topic"):
            for t in list(region.topics.values()):
                out.append(await self._info(t, "topic"))
        if kind in (None, "subscription"):
            for sub in list(region.subscriptions.values()):
                out.append(await self._info(sub, "subscription"))
        return out

    async def destination(self, target: Target) -> DestinationInfo:
        """One destination's statistics (a queue, topic, or `durable://` subscription key)."""
        holder, kind = self._holder(target)
        return await self._info(holder, kind)

    def _holder(self, target: Target) -> tuple[Any, str]:
        region = self._region
        if isinstance(target, str) and target.startswith("durable://"):
            sub = region.subscriptions.get(target)
            if sub is None:
                raise DestinationError(f"no durable subscription {target}")
            return sub, "subscription"
        dest = _destination(target)
        holder = region.queues.get(dest) if dest.is_queue else region.topics.get(dest)
        if holder is None:
            raise DestinationError(f"{dest} does not exist")
        return holder, "queue" if dest.is_queue else "topic"

    def _queue_like(self, target: Target) -> Any:
        holder, kind = self._holder(target)
        if kind == "topic":
            raise DestinationError(f"{target}: a topic holds no messages; browse one of its "
                                   "durable subscriptions (durable://CLIENT:NAME)")
        return holder

    async def _info(self, holder: Any, kind: str) -> DestinationInfo:
        s = holder.stats
        region = self._region
        depth, consumers = s.pending, s.consumers
        if kind == "topic":
            subs = region.subscriptions_for(holder.destination)
            depth = sum(x.stats.pending for x in subs)
            consumers = sum(x.stats.consumers for x in subs)
        store_used = 0
        if kind != "topic" and getattr(holder, "persists", False):
            store_used = (await region.store.stats(holder.key)).size
        now = time.monotonic()
        previous = self._last.get(holder.key)
        rates = Rates()
        if previous is not None and now > previous[0]:
            span = now - previous[0]
            rates = Rates((s.enqueued - previous[1]) / span, (s.dequeued - previous[2]) / span)
        self._last[holder.key] = (now, s.enqueued, s.dequeued)
        dest = holder.destination
        return DestinationInfo(
            key=holder.key, kind=kind, name=dest.name if kind != "subscription" else holder.key,
            depth=depth, enqueued=s.enqueued, dequeued=s.dequeued, dispatched=s.dispatched,
            in_flight=s.in_flight, expired=s.expired, dead_lettered=s.dead_lettered,
            consumers=consumers, producers=s.producers, memory_used=s.memory_used,
            store_used=store_used, rates=rates,
            queue_type=getattr(holder, "queue_type", None) if kind == "queue" else None,
            paused=bool(getattr(holder, "paused", False)), temporary=dest.is_temporary,
            duplicates=s.duplicates, replaced=s.replaced, discarded=s.discarded,
        )

    def connections(self) -> list[ConnectionInfo]:
        """Open client connections (the broker's own internal one left out)."""
        return [
            ConnectionInfo(c.id, c.client_id, c.user, c.transport, c.remote_address,
                           len(c.consumers), len(c.producers), c.network)
            for c in list(self._broker.connections)
        ]

    def consumers(self, target: Target | None = None) -> list[ConsumerInfo]:
        """Consumers (browsers included), all or those on `target`."""
        dest = _destination(target) if target is not None else None
        out = []
        active: dict[int, set[int]] = {}  # id(queue) -> ids of its active consumers
        for conn in list(self._broker.connections):
            for c in list(conn.consumers.values()):
                if dest is not None and c.destination != dest:
                    continue
                on, parts = True, None
                queue = c.queue
                if not c.browser and isinstance(queue, Queue):
                    ids = active.get(id(queue))
                    if ids is None:
                        ids = active[id(queue)] = {id(a) for a in queue.active_consumers()}
                    on = id(c) in ids
                    owned = queue.partitions_of(c)
                    parts = tuple(owned) if owned is not None else None
                out.append(ConsumerInfo(
                    c.id, c.name, conn.id, conn.client_id, c.destination.key, c.selector_text,
                    c.prefetch, len(c.inflight), c.browser, c.durable_name, c.exclusive,
                    c.priority, on, parts))
        return out

    def producers(self, target: Target | None = None) -> list[ProducerInfo]:
        """Producers attached to a destination (AMQP sender links with a target)."""
        dest = _destination(target) if target is not None else None
        return [ProducerInfo(conn.id, conn.client_id, d.key)
                for conn in list(self._broker.connections) for d in conn.producers
                if dest is None or d == dest]

    def durable_subscriptions(self) -> list[SubscriptionInfo]:
        return [self._sub_info(sub) for sub in list(self._region.subscriptions.values())]

    def durable_subscription(self, client_id: str, name: str) -> SubscriptionInfo | None:
        """The durable subscription `name` of `client_id`, or None."""
        sub = self._region.subscriptions.get(subscription_key(client_id, name))
        return self._sub_info(sub) if sub is not None else None

    @staticmethod
    def _sub_info(sub: Any) -> SubscriptionInfo:
        r = sub.record
        return SubscriptionInfo(sub.key, r.client_id, r.name, r.topic, r.selector, r.no_local,
                                any(not c.closed for c in sub.consumers), sub.stats.pending)

    def broker_connections(self) -> list[BrokerConnectionInfo]:
        """Registered broker connections with their state."""
        return self._connections.describe()

    def outgoing_connections(self) -> list[Any]:
        """Outgoing connections plugins opened by URI (`broker.outgoing`), as
        `OutgoingConnectionInfo` snapshots: name, URI, state, peer, last error,
        connects, failures, owner (docs/outgoing-connections.md)."""
        outgoing = getattr(self._broker, "outgoing", None)
        return list(outgoing.list()) if outgoing is not None else []

    async def close_outgoing_connection(self, name: str) -> bool:
        """Close an outgoing connection and stop its reconnecting; False when unknown."""
        outgoing = getattr(self._broker, "outgoing", None)
        if outgoing is None or outgoing.get(name) is None:
            return False
        await outgoing.close(name)
        return True

    # -- messages ----------------------------------------------------------------------
    async def browse(self, target: Target, *, after: int = 0, limit: int = 100,
                     selector: str | None = None) -> BrowsePage:
        """A page of messages from the store and memory, in sequence order, after
        sequence `after`; pass `page.next_after` back for the next page."""
        if limit <= 0:
            raise ValueError("limit must be positive")
        queue = self._queue_like(target)
        sel = Selector.compile(selector) if selector else None
        return await browse_page(queue, self._region.store, after, limit, sel)

    async def get_message(self, target: Target, message_id: str) -> MessageInfo | None:
        """The message with `message_id` on `target`, or None."""
        queue = self._queue_like(target)
        async for seq, message, entry in scan(queue, self._region.store):
            if message.message_id == message_id:
                return message_info(seq, message, entry, queue.key)
        return None

    async def _select(self, queue: Any, message_ids: Collection[str] | None,
                      selector: str | None) -> list[tuple[int, Message, Any]]:
        if message_ids is None and selector is None:
            raise ValueError("name the messages: message_ids=[...] or selector='...'")
        ids = set(message_ids) if message_ids is not None else None
        sel = Selector.compile(selector) if selector else None
        return [item async for item in scan(queue, self._region.store, 0, sel)
                if ids is None or item[1].message_id in ids]

    async def remove_messages(self, target: Target, *, message_ids: Collection[str] | None = None,
                              selector: str | None = None) -> int:
        """Remove messages by id or selector (not those a consumer holds now), from
        memory and the store. Returns how many were removed."""
        queue = self._queue_like(target)
        async with self._lock(queue):
            chosen = await self._select(queue, message_ids, selector)
            return int(await queue.remove_messages([seq for seq, _, _ in chosen]))

    async def sequence_bounds(self, target: Target) -> tuple[int, int]:
        """`(first, last)`: the lowest sequence number `target` still holds and the
        highest one committed (written and visible); `first == last + 1` when it
        holds none. Readers by sequence (the Spark source) page `(after, last]`."""
        queue = self._queue_like(target)
        region = self._region
        if queue.persists:
            last = int((await region.store.stats(queue.key)).last_seq)
            head = await region.store.read(queue.key, 0, 1)
            return (int(head[0].seq) if head else last + 1), last
        held = queue.memory_entries()
        last = int(queue.last_seq)
        return (int(held[0].seq) if held else last + 1), last

    async def release_through(self, target: Target, seq: int) -> int:
        """Remove every message of `target` with a sequence number up to `seq` (no
        consumer holding it), from memory and the store, as acknowledged: what a
        reader by sequence has committed. Returns how many were removed."""
        queue = self._queue_like(target)
        region = self._region
        seqs: list[int] = []
        if queue.persists:
            after = 0
            while after < seq:
                page = await region.store.read(queue.key, after, 10_000)
                page = [r for r in page if r.seq <= seq]
                if not page:
                    break
                seqs.extend(int(r.seq) for r in page)
                after = int(page[-1].seq)
        seqs.extend(e.seq for e in queue.memory_entries() if e.seq <= seq)
        if not seqs:
            return 0
        return int(await queue.remove_messages(seqs, RemovalReason.ACKED))

    async def copy_messages(self, target: Target, to: Target, *,
                            message_ids: Collection[str] | None = None,
                            selector: str | None = None) -> int:
        """Send copies of messages (by id or selector) to `to`; the originals stay.
        Returns how many copies landed (`copy_messages_report` also says how many
        duplicate detection dropped)."""
        return (await self.copy_messages_report(target, to, message_ids=message_ids,
                                                selector=selector)).done

    async def copy_messages_report(self, target: Target, to: Target, *,
                                   message_ids: Collection[str] | None = None,
                                   selector: str | None = None) -> Relocated:
        """`copy_messages`, answering how many copies landed and how many duplicate
        detection dropped at `to`. `to` may be `target` itself: the messages are
        chosen before any copy is sent, so each is there twice afterwards
        (ActiveMQ's `copyMessageTo`), never copied again; a move there is refused
        (`move_messages`)."""
        queue = self._queue_like(target)
        dest = _plain_queue(to, "copy")
        sender = self._sender()
        async with self._lock(queue):
            chosen = await self._select(queue, message_ids, selector)
            done = 0
            for _, message, _ in chosen:
                done += await _landed(sender, self._forwarded(message, dest, queue.destination))
        return Relocated(done, len(chosen) - done)

    async def move_messages(self, target: Target, to: Target, *,
                            message_ids: Collection[str] | None = None,
                            selector: str | None = None) -> int:
        """Move messages (by id or selector) to `to`; returns how many moved
        (`move_messages_report`)."""
        return (await self.move_messages_report(target, to, message_ids=message_ids,
                                                selector=selector)).done

    async def move_messages_report(self, target: Target, to: Target, *,
                                   message_ids: Collection[str] | None = None,
                                   selector: str | None = None) -> Relocated:
        """Move messages (by id or selector) to `to`: each is stored there, then
        removed here (a crash in between leaves it in both, never in neither).
        Messages a consumer holds now are not moved; nor is one duplicate detection
        drops at `to` (counted in `duplicates`): it stays here."""
        queue = self._queue_like(target)
        dest = _plain_queue(to, "move")
        if dest == queue.destination:  # a bad argument, as every other wrong target
            raise ValueError("moving messages to where they are is not a move: give another "
                             "queue as 'to'")
        async with self._lock(queue):
            chosen = [c for c in await self._select(queue, message_ids, selector)
                      if c[2] is None or c[2].consumer is None]
            moves = [(seq, self._forwarded(m, dest, queue.destination), None)
                     for seq, m, _ in chosen]
            return await self._relocate(queue, moves)

    async def retry_messages(self, target: Target, *, message_ids: Collection[str] | None = None,
                             selector: str | None = None) -> int:
        """Send dead-lettered messages back to where they came from; returns how many
        went back (`retry_messages_report`)."""
        return (await self.retry_messages_report(target, message_ids=message_ids,
                                                 selector=selector)).done

    async def retry_messages_report(
            self, target: Target, *, message_ids: Collection[str] | None = None,
            selector: str | None = None,
            may_send: Callable[[Destination], bool] | None = None) -> Relocated:
        """Send dead-lettered messages (by id or selector) from the dead-letter queue
        `target` back to the destination each came from, with its original
        expiration (ActiveMQ's `retryMessages`). A topic message a durable subscriber
        rejected goes back to that subscription only; while the subscription does
        not exist it stays here. `may_send` (asked once per original destination)
        False: the messages from there stay here, counted in `refused`; one that
        duplicate detection drops there stays here too (`duplicates`)."""
        queue = self._queue_like(target)
        region = self._region
        allowed: dict[Destination, bool] = {}
        refused: dict[str, int] = {}
        async with self._lock(queue):
            moves = []
            for seq, message, entry in await self._select(queue, message_ids, selector):
                annotations = dict(message.annotations or {})
                origin = annotations.pop(ORIGINAL_DESTINATION, None)
                if not origin or (entry is not None and entry.consumer is not None):
                    continue
                key = annotations.pop(ORIGINAL_SUBSCRIPTION, None)
                sub = region.subscriptions.get(str(key)) if key is not None else None
                if key is not None and sub is None:
                    continue  # its subscription is gone: the rest of the topic had it
                back = Destination.parse(str(origin))
                if may_send is not None:
                    if back not in allowed:
                        allowed[back] = may_send(back)
                    if not allowed[back]:
                        refused[back.key] = refused.get(back.key, 0) + 1
                        continue
                expiration = annotations.pop(ORIGINAL_EXPIRATION, 0) or 0
                annotations.pop(DLQ_DELIVERY_FAILURE_CAUSE, None)
                moves.append((seq, message.copy(destination=back, expiration=int(expiration),
                                                annotations=annotations or None), sub))
            moved = await self._relocate(queue, moves)
        return Relocated(moved.done, moved.duplicates, refused)

    async def _relocate(self, queue: Any, moves: list[tuple[int, Message, Any]]) -> Relocated:
        """Send each copy (to the subscription given, else by its destination), then
        remove here the originals of those that landed (not those duplicate detection
        dropped)."""
        sender = self._sender()
        landed: list[int] = []
        for seq, copy, sub in moves:
            if sub is not None:
                await self._region.redeliver_to(sub, copy)
                landed.append(seq)
            elif await _landed(sender, copy):
                landed.append(seq)
        if landed:
            await queue.remove_messages(landed, RemovalReason.MOVED)
        return Relocated(len(landed), len(moves) - len(landed))

    def _sender(self) -> _Sender:
        """A connection of the broker's own for one copy, move or retry: its
        `duplicates` counts just that operation's sends duplicate detection dropped."""
        return self._broker.operation_connection()

    @staticmethod
    def _forwarded(message: Message, dest: Destination, origin: Destination) -> Message:
        annotations = dict(message.annotations or {})
        annotations.setdefault(ORIGINAL_DESTINATION, origin.key)
        return message.copy(destination=dest, annotations=annotations)

    async def purge(self, target: Target) -> int:
        """Remove every message not held by a consumer, the store included (also
        what is paged out). Returns how many were removed."""
        queue = self._queue_like(target)
        async with self._lock(queue):
            return int(await queue.purge_all())

    def _lock(self, queue: Any) -> asyncio.Lock:
        key = queue.destination.key
        lock = self._busy.get(key)
        if lock is None:
            lock = self._busy[key] = asyncio.Lock()
        return lock

    # -- queues and destinations --------------------------------------------------------
    def pause(self, target: Target) -> None:
        """Stop dispatching from a queue; consumers stay attached, messages wait."""
        queue = self._queue_like(target)
        if not queue.paused:
            queue.pause()
            self._region.writer.note(DestinationConfigured(queue.destination, {"paused": True}))

    def resume(self, target: Target) -> None:
        """Dispatch from a paused queue again."""
        queue = self._queue_like(target)
        if queue.paused:
            queue.resume()
            self._region.writer.note(DestinationConfigured(queue.destination, {"paused": False}))

    async def create_queue(self, name: str, queue_type: str | None = None) -> DestinationInfo:
        """Create a queue (of `queue_type`, an installed `relaymq.queue_types` name).
        A name that is not one plain queue is a bad argument (ValueError), a type that is
        not installed PluginNotFound, an existing queue of another type a StateConflict."""
        from relaymq.broker.queue_types import resolve_queue_type

        dest = _destination(name)
        if not dest.is_queue or dest.is_wildcard or dest.is_composite or dest.is_temporary:
            raise ValueError(f"{name}: create_queue needs one plain queue name, not a wildcard, "
                             "several queues or another kind of destination")
        region = self._region
        if queue_type and queue_type not in region.queue_types:  # PluginNotFound: not installed
            region.queue_types[queue_type] = resolve_queue_type(self._broker.plugins, queue_type)
        existing = region.queues.get(dest)
        if existing is not None:
            if queue_type and existing.queue_type != queue_type:
                raise StateConflict(f"{dest} exists as a {existing.queue_type!r} queue, "
                                    f"not {queue_type!r}")
            return await self._info(existing, "queue")
        if queue_type:
            region.declared_types[dest] = queue_type
        queue = await region.queue(dest)
        if queue_type and region.declarations.queue_type(dest) != queue_type:
            await region.declarations.declare(dest, queue_type)  # kept across restarts
        return await self._info(queue, "queue")

    def queue_settings(self, target: Target) -> dict[str, Any]:
        """The settings declared for a queue through `set_queue_settings` (a copy;
        {} when none). Queue-type plugins keep their per-queue state here."""
        return dict(self._region.declarations.settings(_destination(target)))

    async def set_queue_settings(self, target: Target, settings: Mapping[str, Any], *,
                                 replace: bool = False) -> dict[str, Any]:
        """Merge `settings` (JSON values; None removes one) into an existing queue's
        declared settings, kept in the store across restarts; returns them."""
        dest = _destination(target)
        region = self._region
        if dest not in region.queues or dest.is_temporary:
            raise DestinationError(f"{dest} is not an existing queue")
        try:
            json.dumps(dict(settings))
        except (TypeError, ValueError) as exc:
            raise DestinationError(f"settings of {dest} must be JSON values: {exc}") from None
        await region.declarations.declare(dest, None, dict(settings), replace=replace)
        return region.declarations.settings(dest)

    def declared_queues(self) -> list[Destination]:
        """Queues with a type or settings declared through management."""
        return self._region.declarations.declared()

    async def create_topic(self, name: str) -> DestinationInfo:
        dest = Destination.topic(name) if "://" not in name else _destination(name)
        if not dest.is_topic or dest.is_wildcard or dest.is_composite or dest.is_temporary:
            raise DestinationError(f"{name}: create_topic needs one plain topic name")
        return await self._info(await self._region.topic(dest), "topic")

    async def delete_destination(self, target: Target) -> bool:
        """Delete a queue (its messages too) or topic; consumers on it are closed."""
        return bool(await self._broker.delete_destination(_destination(target)))

    async def delete_durable_subscription(self, client_id: str, name: str) -> bool:
        """Remove a durable subscription and its messages; refused while a consumer is attached."""
        region = self._region
        sub = region.subscriptions.get(subscription_key(client_id, name))
        if sub is None:
            return False
        if any(not c.closed for c in sub.consumers):
            raise DestinationError(f"durable subscription {name!r} of {client_id} is in use")
        region.remove_subscription(sub)
        ops = [RemoveSubscription(sub.key)] if region.store_persistent else []
        record = sub.record
        await region.writer.write(ops, (SubscriptionDeleted(
            sub.key, record.client_id, record.name, sub.destination),) if record else ())
        return True

    # -- connections ---------------------------------------------------------------------
    async def close_connection(self, connection_id: str, reason: str = "closed by management") -> bool:
        """Close a client connection: the transport tells the client `reason` (STOMP
        ERROR frame, AMQP connection close) and the kernel side goes away."""
        for conn in list(self._broker.connections):
            if conn.id == connection_id:
                conn.request_close(reason)
                await conn.close()
                return True
        return False

    def register_broker_connection(self, name: str, connection: Any, *, kind: str = "broker-connection",
                                   uri: str | None = None) -> None:
        """Add a broker connection (a service with ``async start()``/``stop()``) so
        management can list, start and stop it."""
        self._connections.register(name, connection, kind, uri)

    def unregister_broker_connection(self, name: str) -> None:
        self._connections.unregister(name)

    async def start_broker_connection(self, name: str) -> None:
        await self._connections.start(name)

    async def broker_connection_operation(self, name: str, operation: str) -> list[Any]:
        """Run `operation` (e.g. ``sync``) on the child operations of broker
        connection `name` that offer it (an ``async`` method of that name);
        returns their results. `DestinationError` when none does."""
        return await self._connections.operation(name, operation)

    async def stop_broker_connection(self, name: str) -> None:
        await self._connections.stop(name)

    async def stop_broker_connections(self) -> None:
        """Stop every registered broker connection (the broker does this when it stops)."""
        await self._connections.stop_all()

    def register_incoming_broker_connection(self, name: str, entry: Any) -> None:
        """Make a broker connection another broker opened to this one known (an
        object with a ``status()`` dict and, optionally, ``kind``, ``remote_node``,
        ``remote_address``, ``connected``). Registering the same object again is a
        no-op; another one under a taken name raises `DestinationError`."""
        self._incoming.register(name, entry)

    def unregister_incoming_broker_connection(self, name: str) -> None:
        self._incoming.unregister(name)

    def incoming_broker_connections(self) -> list[IncomingBrokerConnectionInfo]:
        """Broker connections other brokers opened to this one (a mirror's sources)."""
        return self._incoming.describe()

    # -- events -------------------------------------------------------------------------
    def listen(self, callback: Listener) -> Callable[[], None]:
        """Call `callback(ManagementEvent)` for connection, consumer and producer
        open/close; returns a function that stops it."""
        relay = self._relay
        if relay is None:
            relay = self._relay = EventRelay(self)
            self._broker.plugins.register(relay, name="relaymq.management.events")
        relay.listeners.append(callback)

        def stop() -> None:
            if callback in relay.listeners:
                relay.listeners.remove(callback)

        return stop
