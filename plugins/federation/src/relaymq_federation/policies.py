"""Address and queue policies at work on one connection: demand on this broker
opens federation receivers on the peer (`Receivers`), their end closes them.

The same machinery runs a ``<federation>``'s local policies over the
connection it opened (`operation.Federation`) and the remote policies a peer
sent over its control link, over the connection the peer opened
(`remote.RemotePolicies`): in both cases this broker has the consumers and
pulls from the other side.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

from relaymq.feed import SubscriptionCreated, SubscriptionDeleted
from relaymq.model.destination import Destination
from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Terminus
from relaymq_amqp.types import Described, Long, Symbol, ULong

from relaymq_federation import address_queue, wire
from relaymq_federation.config import AddressPolicy, QueuePolicy
from relaymq_federation.demand import Demand, is_federation_consumer
from relaymq_federation.hops import max_hops_selector
from relaymq_federation.publisher import LocalPublisher
from relaymq_federation.receivers import (
    RETRY_DELAY,
    RETRY_DELAY_WITH_EVENTS,
    Receivers,
    ReceiverSpec,
)

log = logging.getLogger("relaymq.federation")


def flag(value: Any) -> bool:
    """A boolean setting (``federation-configuration`` values may be strings)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "on", "1")
    return bool(value)


class QueueKey(NamedTuple):
    """One queue receiver: Artemis makes one per distinct (queue, consumer
    filter, priority) of the local demand, and carries the filter to the remote
    as its ``jms-selector`` so only matching messages are pulled."""

    queue: str
    selector: str | None
    priority: int

    def __str__(self) -> str:
        return self.queue if self.selector is None else f"{self.queue} [{self.selector}]"


class PolicyRunner:
    """The receivers one federation's policies want on one connection.

    `conn` attaches the receivers (``attach_receiver``); `is_open()` says
    whether it can now; `setting(key)` reads the federation's settings;
    `remote_id` is the peer's node id (consumers its own federation made here
    are not demand: they would pull its messages back to it)."""

    def __init__(self, broker: Any, conn: Any, *, name: str, node_id: str,
                 setting: Callable[[str], Any], publisher: LocalPublisher,
                 is_open: Callable[[], bool]) -> None:
        self.broker = broker
        self.conn = conn
        self.name = name
        self.node_id = node_id
        self.setting = setting
        self.publisher = publisher
        self.is_open = is_open
        self.remote_id: str | None = None
        self.address_policies: list[AddressPolicy] = []
        self.queue_policies: list[QueuePolicy] = []
        self.addresses: Receivers | None = None
        self.queues: Receivers | None = None
        self._address_demand: Demand | None = None
        self._queue_demand: Demand | None = None
        self._durable_task: asyncio.Task[None] | None = None
        self._seq = itertools.count(1)
        self._enabled = False
        #: the peer must offer the receiver capability on each answer (`Receivers.require_offered`)
        self.require_offered = False
        #: the peer's events link is attached (refused receivers wait for its events)
        self.events_attached = False

    @property
    def label(self) -> str:
        return f"federation {self.name}"

    def _receivers(self, make: Callable[[Any], ReceiverSpec], idle_key: str) -> Receivers:
        r = Receivers(self.conn, self.publisher, make, int(self.setting(idle_key)) / 1000.0,
                      int(self.setting("amqpCredits")), self.label, is_open=self.is_open,
                      require_offered=self.require_offered)
        r.enabled = self._enabled
        if self.events_attached:
            r.retry_delay = RETRY_DELAY_WITH_EVENTS
        return r

    # -- policies ---------------------------------------------------------------------
    def add_address_policy(self, policy: AddressPolicy, scan: bool = False) -> None:
        self.address_policies.append(policy)
        if self.addresses is None:
            self.addresses = self._receivers(self._address_spec, "addressReceiverIdleTimeout")
            demand = self._address_demand = Demand(self._address_key, self._changed(self.addresses))
            demand.start(self.broker.management)
            self._durable_task = asyncio.get_running_loop().create_task(self._durable_demand(demand))
        if scan:
            self._address_demand.scan(self.broker)  # type: ignore[union-attr]

    def add_queue_policy(self, policy: QueuePolicy, scan: bool = False) -> None:
        self.queue_policies.append(policy)
        if self.queues is None:
            self.queues = self._receivers(self._queue_spec, "queueReceiverIdleTimeout")
            demand = self._queue_demand = Demand(self._queue_key, self._changed(self.queues))
            demand.start(self.broker.management)
        if scan:
            self._queue_demand.scan(self.broker)  # type: ignore[union-attr]

    # -- lifecycle --------------------------------------------------------------------
    def enable(self) -> None:
        """The peer accepts receivers now (its control link is attached)."""
        self._enabled = True
        for receivers in self.all_receivers():
            receivers.enabled = True
        self.reevaluate()

    def all_receivers(self) -> list[Receivers]:
        return [r for r in (self.addresses, self.queues) if r is not None]

    def reconcile(self) -> None:
        for receivers in self.all_receivers():
            receivers.reconcile()

    def reevaluate(self) -> None:
        """Judge every key again (the peer's node id is known now, or changed)."""
        for demand, receivers in ((self._address_demand, self.addresses),
                                  (self._queue_demand, self.queues)):
            if demand is None or receivers is None:
                continue
            changed = self._changed(receivers)
            for key, tokens in list(demand.counts.items()):
                changed(key, list(tokens.values()))

    async def stop(self) -> None:
        for demand in (self._address_demand, self._queue_demand):
            if demand is not None:
                demand.stop()
        if self._durable_task is not None:
            self._durable_task.cancel()
        for receivers in self.all_receivers():
            await receivers.close()

    def _changed(self, receivers: Receivers) -> Callable[[Any, list[str | None]], None]:
        def changed(key: Hashable, origins: list[str | None]) -> None:
            if any(o is None or o != self.remote_id for o in origins):
                receivers.want(key)
            else:
                receivers.unwant(key)
        return changed

    async def _durable_demand(self, demand: Demand) -> None:
        """Durable subscriptions on a matching address are demand, with or
        without a consumer (Artemis counts every queue bound to the address)."""
        feed = self.broker.change_feed.subscribe({SubscriptionCreated, SubscriptionDeleted},
                                                 name=f"{self.label} subscriptions")
        try:
            for sub in self.broker.management.durable_subscriptions():
                address = self._address_of(Destination.parse(sub.topic))
                if address is not None:
                    demand.count(address, sub.key, True, address_queue.origin_of(sub.client_id))
            while True:
                event = await feed.get()
                address = self._address_of(event.topic)
                if address is not None:
                    demand.count(address, event.key, isinstance(event, SubscriptionCreated),
                                 event.origin)
        finally:
            feed.close()

    # -- address policies -------------------------------------------------------------
    def _address_key(self, consumer: Any) -> str | None:
        return self._address_of(consumer.destination)

    def _address_of(self, dest: Destination) -> str | None:
        if not dest.is_topic or dest.is_temporary or dest.is_wildcard:
            return None
        if any(p.selects(dest.name) for p in self.address_policies):
            return dest.name
        return None

    def _address_spec(self, address: str) -> ReceiverSpec:
        policy = next(p for p in self.address_policies if p.selects(address))
        queue = wire.address_queue_name(self.name, policy.name, address, self.node_id)
        filters: dict[Any, Any] = {
            Symbol(wire.NO_LOCAL_KEY): Described(ULong(wire.NO_LOCAL_CODE), "NoLocalFilter{}")}
        if policy.max_hops > 0:
            filters[Symbol(wire.SELECTOR_KEY)] = Described(ULong(wire.SELECTOR_CODE),
                                                           max_hops_selector(policy.max_hops))
        source = Terminus(kind=1, address=f"{address}::{queue}", capabilities=["topic"],
                          expiry_policy=pn.EXPIRE_WITH_LINK, filter=filters)
        name = (f"federation-{self.name}-policy-{policy.name}-address-receiver-{address}-"
                f"{self.node_id}-{next(self._seq)}")
        props = {wire.ADDRESS_SOURCE_PROPERTIES: {
            "auto-delete": policy.auto_delete, "auto-delete-delay": Long(policy.auto_delete_delay),
            "auto-delete-msg-count": Long(policy.auto_delete_message_count)},
            wire.POLICY_NAME: policy.name}
        return ReceiverSpec(name, source, Terminus(kind=2, address=address),
                            Destination.topic(address), props, [wire.ADDRESS_RECEIVER], add_hops=True)

    # -- queue policies ---------------------------------------------------------------
    def _queue_key(self, consumer: Any) -> QueueKey | None:
        dest = consumer.destination
        if not dest.is_queue or dest.is_temporary:
            return None
        federated = is_federation_consumer(consumer)
        for p in self.queue_policies:
            if p.selects(dest.name, dest.name) and (p.include_federated or not federated):
                selector = None if flag(self.setting("ignoreQueueConsumerFilters")) else \
                    getattr(consumer, "selector_text", None)
                if federated:
                    # a counted federation consumer passes its own priority on (no
                    # ever-lower priorities around a ring of brokers)
                    priority = int(getattr(consumer, "priority", 0))
                elif flag(self.setting("ignoreQueueConsumerPriorities")):
                    priority = 0 + p.priority_adjustment
                else:
                    priority = int(getattr(consumer, "priority", 0)) + p.priority_adjustment
                return QueueKey(dest.name, selector or None, priority)
        return None

    def _queue_spec(self, key: QueueKey) -> ReceiverSpec:
        queue = key.queue
        policy = next(p for p in self.queue_policies if p.selects(queue, queue))
        fqqn = f"{queue}::{queue}"
        filters: dict[str, Any] = {}  # none (a compiled Terminus takes no None)
        if key.selector is not None:
            filters = {Symbol(wire.SELECTOR_KEY): Described(ULong(wire.SELECTOR_CODE), key.selector)}
        source = Terminus(kind=1, address=fqqn, capabilities=["queue"],
                          expiry_policy=pn.EXPIRE_WITH_LINK, filter=filters)
        name = (f"federation-{self.name}-policy-{policy.name}-queue-receiver-{fqqn}-"
                f"{self.node_id}:{next(self._seq)}")
        props = {wire.PRIORITY: key.priority, wire.POLICY_NAME: policy.name}
        return ReceiverSpec(name, source, Terminus(kind=2, address=fqqn), Destination.queue(queue),
                            props, [wire.QUEUE_RECEIVER])

    # -- events from the peer ---------------------------------------------------------
    def resource_added(self, address: str, queue: str | None) -> int:
        """The peer announced that an address (`queue` None) or a queue it had
        refused a receiver for exists now: attach those receivers again at once."""
        if queue is None:
            retried = self.addresses.retry(lambda k: k == address) if self.addresses else 0
        else:
            retried = self.queues.retry(lambda k: k.queue == queue) if self.queues else 0
        log.info("%s: the peer has %s %s now; %d receiver(s) attached again", self.label,
                 "address" if queue is None else "queue", queue or address, retried)
        return retried

    def set_events(self, attached: bool) -> None:
        """With the peer's events link attached, refused receivers wait for its
        announcement (and retry only rarely on their own)."""
        self.events_attached = attached
        for receivers in self.all_receivers():
            receivers.retry_delay = RETRY_DELAY_WITH_EVENTS if attached else RETRY_DELAY

    def refused(self) -> dict[str, str]:
        """Why the peer's address / queue receivers are refused (empty: none are)."""
        out = {}
        for kind, receivers in (("address", self.addresses), ("queue", self.queues)):
            if receivers is not None and receivers.refused is not None:
                out[kind] = receivers.refused
        return out
