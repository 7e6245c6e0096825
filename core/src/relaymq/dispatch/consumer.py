"""Consumers: a client's subscription to a queue (or topic subscription).

Transports set `on_message` (called synchronously with each `Delivery`; write it
to the client, do not block) and, for browsers, `on_browse_end`. Flow is bounded
either by a prefetch window (unacknowledged deliveries < `prefetch`; STOMP, JMS)
or by link credit (AMQP: `add_credit`, `drain`). A window of 0 means pull:
each `pull()` allows one more delivery.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

from mypy_extensions import mypyc_attr

from relaymq.dispatch.entry import QueueEntry
from relaymq.dispatch.stats import DestinationStatistics
from relaymq.errors import UnknownDelivery
from relaymq.model.destination import Destination
from relaymq.model.message import Message

if TYPE_CHECKING:
    from relaymq.selector import Selector

_ids: Final = itertools.count(1)

#: why deliveries end without an acknowledgement (`QueueBase.return_unacked`)
CONSUMER_LEFT: Final = "its consumer left without settling it"
ROLLED_BACK: Final = "the transaction that acknowledged it was rolled back"


@mypyc_attr(allow_interpreted_subclasses=True)
class QueueBase:
    """What consumers, send batches and transactions call on a queue.

    `dispatch.queue.Queue` is the implementation; consumers and batches hold it as
    a `QueueBase`, so the modules below the queue need not import it (and the
    compiled build still calls it natively)."""

    destination: Destination
    key: str
    stats: DestinationStatistics

    def dispatch(self) -> None:
        raise NotImplementedError

    def discard(self, entry: QueueEntry) -> None:
        """Forget an entry that was prepared but will not be stored (a failed send)."""
        raise NotImplementedError

    def enqueue(self, entry: QueueEntry) -> None:
        """Make a prepared (and stored) entry visible to consumers."""
        raise NotImplementedError

    def acknowledge(self, entry: QueueEntry) -> Awaitable[None] | None:
        raise NotImplementedError

    def acknowledge_all(self, entries: list[QueueEntry]) -> Awaitable[None] | None:
        raise NotImplementedError

    def acknowledged(self, entry: QueueEntry) -> None:
        """An acknowledgement was stored (a committed transaction's)."""
        raise NotImplementedError

    def return_unacked(self, entries: list[QueueEntry], cause: str = "") -> None:
        """Deliveries that ended without an acknowledgement (`cause`: `CONSUMER_LEFT`,
        `ROLLED_BACK`) go back to the queue."""
        raise NotImplementedError

    def settle_negative(self, entry: QueueEntry, mode: str) -> None:
        raise NotImplementedError

    def remove_consumer(self, consumer: Consumer) -> None:
        raise NotImplementedError


class Acks(Protocol):
    """Where a transaction's acknowledgements wait for its commit
    (`broker.transactions.LocalTransaction`)."""

    def add_ack(self, consumer: Consumer, entry: QueueEntry) -> None: ...

    def add_nack(self, consumer: Consumer, entry: QueueEntry, mode: str) -> None:
        """A negative settlement (`NackMode`) applied when the transaction
        commits; a rollback returns the delivery to its queue instead."""


class Delivery:
    """One message handed to one consumer; `id` is what the client acks."""

    __slots__ = ("id", "message", "delivery_count", "entry")

    def __init__(self, id: int, message: Message, delivery_count: int, entry: QueueEntry) -> None:
        self.id = id
        self.message = message
        self.delivery_count = delivery_count  # previous deliveries that were not acked
        self.entry = entry

    @property
    def redelivered(self) -> bool:
        return self.delivery_count > 0


class NackMode:
    RELEASE: Final = "release"  # back to the queue, not a failure (AMQP released)
    FAILED: Final = "failed"  # counted; redelivery policy or the default (AMQP modified failed)
    POISON: Final = "poison"  # counted; the redeliveryPlugin's policy, else the DLQ at once (STOMP NACK)
    REJECT: Final = "reject"  # to the DLQ at once (AMQP rejected)


class Consumer:
    """The kernel side of one consumer; created by `ClientConnection.subscribe`."""

    def __init__(
        self,
        connection: object | None,
        destination: Destination,
        *,
        selector: Selector | None = None,
        prefetch: int = 1000,
        credit_mode: bool = False,
        exclusive: bool = False,
        browser: bool = False,
        durable_name: str | None = None,
        no_local: bool = False,
        priority: int = 0,
        name: str | None = None,
        network: bool = False,
    ) -> None:
        self.id = next(_ids)
        self.name = name or f"consumer-{self.id}"
        #: the `ClientConnection` it belongs to (None: the broker's own consumer)
        self.connection = connection
        self.destination = destination
        self.selector = selector
        self.prefetch = prefetch
        self.credit_mode = credit_mode
        self.credit = 0  # AMQP link credit, or pulls outstanding with prefetch 0
        self.drain_requested = False
        self.exclusive = exclusive
        self.browser = browser
        self.durable_name = durable_name
        self.no_local = no_local
        self.priority = priority
        self.network = network  # a broker-connection consumer (does not widen selector caches)
        self.inflight: dict[int, QueueEntry] = {}
        self.queue: QueueBase | None = None
        self.closed = False
        self._next_delivery = itertools.count(1)
        self.on_message: Callable[[Delivery], Any] = _unset
        self.on_browse_end: Callable[[], Any] | None = None
        self.on_drained: Callable[[], Any] | None = None
        self.on_closed: Callable[[str], Any] | None = None  # broker-side close (queue deleted)

    @property
    def selector_text(self) -> str | None:
        return self.selector.text if self.selector is not None else None

    # -- flow ---------------------------------------------------------------
    def capacity(self) -> int:
        if self.closed:
            return 0
        if self.credit_mode or self.prefetch <= 0:
            return self.credit
        return self.prefetch - len(self.inflight)

    def add_credit(self, n: int) -> None:
        """Grant `n` more deliveries (AMQP flow; or pulls when prefetch is 0)."""
        self.credit += n
        self._kick()

    def set_credit(self, n: int, drain: bool = False) -> None:
        """Set the absolute link credit (AMQP flow frame) and maybe drain."""
        self.credit = max(n, 0)
        self.drain_requested = drain
        self._kick()
        if drain and self.credit > 0:
            self._finish_drain()

    def pull(self) -> None:
        """With prefetch 0: ask for exactly one message."""
        self.add_credit(1)

    def _finish_drain(self) -> None:
        self.credit = 0
        self.drain_requested = False
        if self.on_drained is not None:
            self.on_drained()

    def _kick(self) -> None:
        if self.queue is not None:
            self.queue.dispatch()

    def _took(self, entry: QueueEntry) -> Delivery:
        """Record a delivery of `entry` to this consumer (called by the queue). A
        browser's copy leaves the entry as it was: it stays waiting (or held by the
        consumer it was delivered to), removable by management and mirror acks."""
        did = next(self._next_delivery)
        if not self.browser:
            entry.consumer = self
            entry.delivery_id = did
            self.inflight[did] = entry
        if self.credit_mode or self.prefetch <= 0:
            self.credit -= 1
        return Delivery(did, entry.message, entry.delivery_count, entry)

    # -- settlement -----------------------------------------------------------
    def _take(self, delivery_id: int) -> QueueEntry:
        entry = self.inflight.pop(delivery_id, None)
        if entry is None:
            raise UnknownDelivery(f"consumer {self.name} holds no delivery {delivery_id}")
        return entry

    def ack(self, delivery_id: int, txn: Acks | None = None) -> Awaitable[None] | None:
        """Acknowledge one delivery; returns an awaitable when the removal is being
        stored (await it before telling the client the ack is durable)."""
        entry = self._take(delivery_id)
        assert self.queue is not None
        if txn is not None:
            txn.add_ack(self, entry)
            return None
        return self.queue.acknowledge(entry)

    def ack_many(self, delivery_ids: list[int]) -> Awaitable[None] | None:
        """Acknowledge several deliveries outside a transaction (a transport's acks
        of one read or one batch of settlements) in one queue call, with one
        dispatch into the room they made. Ids this consumer does not hold (already
        settled) are skipped. Returns an awaitable when removals are being stored
        (await it before telling the client they are durable)."""
        inflight = self.inflight
        entries = []
        for did in delivery_ids:
            entry = inflight.pop(did, None)
            if entry is not None:
                entries.append(entry)
        if not entries:
            return None
        assert self.queue is not None
        return self.queue.acknowledge_all(entries)

    def ack_cumulative(self, delivery_id: int, txn: Acks | None = None) -> Awaitable[None] | None:
        """Acknowledge `delivery_id` and every earlier delivery still held."""
        if delivery_id not in self.inflight:
            raise UnknownDelivery(f"consumer {self.name} holds no delivery {delivery_id}")
        # `inflight` is in delivery order (ids only grow), so stop at the first later one.
        ids = []
        for did in self.inflight:
            if did > delivery_id:
                break
            ids.append(did)
        inflight = self.inflight
        entries = [inflight.pop(did) for did in ids]
        assert self.queue is not None
        if txn is not None:
            for entry in entries:
                txn.add_ack(self, entry)
            return None
        # one dispatch for the whole range, not one per acknowledged message
        return self.queue.acknowledge_all(entries)

    def nack(self, delivery_id: int, mode: str = NackMode.POISON, txn: Acks | None = None) -> None:
        """Settle a delivery negatively (`NackMode`); inside a transaction the
        settlement waits for its commit (a rollback returns the delivery instead)."""
        entry = self._take(delivery_id)
        assert self.queue is not None
        if txn is not None:
            txn.add_nack(self, entry, mode)
            return
        self.queue.settle_negative(entry, mode)

    def release(self, delivery_id: int, txn: Acks | None = None) -> None:
        self.nack(delivery_id, NackMode.RELEASE, txn)

    def fail(self, delivery_id: int, txn: Acks | None = None) -> None:
        self.nack(delivery_id, NackMode.FAILED, txn)

    def reject(self, delivery_id: int, txn: Acks | None = None) -> None:
        self.nack(delivery_id, NackMode.REJECT, txn)

    def holds(self, delivery_id: int) -> bool:
        return delivery_id in self.inflight

    def close(self) -> None:
        """Detach: every unacknowledged delivery returns to the queue as redelivered."""
        if self.closed:
            return
        self.closed = True
        if self.queue is not None:
            self.queue.remove_consumer(self)

    def __repr__(self) -> str:
        return f"Consumer({self.name}, {self.destination}, selector={self.selector_text!r})"


def _unset(delivery: Delivery) -> None:
    raise RuntimeError("consumer.on_message was not set before credit was granted")
