"""``<federation>`` inside ``<amqp-connection>``: the source side.

On each connection it opens the control link (Artemis' shape: a sender to a
dynamic target, link properties ``federation_version``,
``federation-configuration`` and ``federationName``), sends the remote
policies over it, and runs the local policies: demand on a matching local
address (a topic consumer) opens an address receiver on the peer, demand on a
matching local queue opens a queue receiver (consumer priority adjusted by
``priority-adjustment``). Receivers go away after the idle timeout when the
demand does.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from relaymq.config.model import PluginElement
from relaymq.feed import SubscriptionCreated, SubscriptionDeleted
from relaymq.model.destination import Destination
from relaymq.outgoing.node import node_id
from relaymq_amqp import engine as pn
from relaymq_amqp.encode import section
from relaymq_amqp.engine import Terminus
from relaymq_amqp.types import Described, Long, Symbol, ULong

from relaymq_federation import wire
from relaymq_federation.config import FederationConfig, federation_config
from relaymq_federation.demand import Demand, is_federation_consumer
from relaymq_federation.hops import max_hops_selector
from relaymq_federation.publisher import LocalPublisher
from relaymq_federation.receivers import Receivers, ReceiverSpec

log = logging.getLogger("relaymq.federation")

DELETE_ON_CLOSE = Described(Symbol("amqp:delete-on-close:list"), [])
#: seconds between checks that every wanted receiver is attached
RECONCILE_EVERY = 1.0


def policy_command(op: str, policy_map: dict[str, Any]) -> bytes:
    """A control-link command: the op-type annotation and the policy map."""
    return section(0x72, {Symbol(wire.OP_TYPE): op}) + section(0x77, policy_map)


class Federation:
    """One ``<federation>`` element (a `ConnectionOperation`)."""

    def __init__(self, element: PluginElement, broker: Any) -> None:
        self.element = element
        self.broker = broker
        self.config: FederationConfig = federation_config(element, "")
        self.conn: Any = None
        self.node_id = node_id(broker)  # the container id of its broker connection too
        self.remote_id: str | None = None
        self.control: Any = None
        self.publisher: LocalPublisher | None = None
        self.addresses: Receivers | None = None
        self.queues: Receivers | None = None
        self._demands: list[Demand] = []
        self._task: asyncio.Task[None] | None = None
        self._durable_task: asyncio.Task[None] | None = None
        self._seq = itertools.count(1)

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any) -> Federation:
        return cls(element, broker)

    # -- lifecycle --------------------------------------------------------------------
    async def start(self, connection: Any) -> None:
        if not hasattr(connection, "attach_receiver"):
            raise TypeError(f"<federation> needs an AMQP connection, not {type(connection).__name__}")
        self.conn = connection
        cfg = self.config
        if not cfg.name:
            cfg.name = connection.name
        # Demand is tracked from the start: consumers that come while the peer is
        # still unreachable are served once the control link is up.
        self.publisher = LocalPublisher(self.broker, f"federation {cfg.name}", None)
        credit = int(cfg.setting("amqpCredits"))
        label = f"federation {cfg.name}"
        management = self.broker.management
        loop = asyncio.get_running_loop()
        if cfg.local_address_policies:
            self.addresses = Receivers(connection, self.publisher, self._address_spec,
                                       int(cfg.setting("addressReceiverIdleTimeout")) / 1000.0,
                                       credit, label)
            demand = Demand(self._address_key, self._changed(self.addresses))
            self._demands.append(demand)
            demand.start(management)
            self._durable_task = loop.create_task(self._durable_demand(demand))
        if cfg.local_queue_policies:
            self.queues = Receivers(connection, self.publisher, self._queue_spec,
                                    int(cfg.setting("queueReceiverIdleTimeout")) / 1000.0,
                                    credit, label)
            demand = Demand(self._queue_key, self._changed(self.queues))
            self._demands.append(demand)
            demand.start(management)
        self._task = loop.create_task(self._run(), name=f"federation {cfg.name}")

    async def stop(self) -> None:
        for demand in self._demands:
            demand.stop()
        self._demands.clear()
        if self._durable_task is not None:
            self._durable_task.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        for receivers in (self.addresses, self.queues):
            if receivers is not None:
                await receivers.close()
        if self.publisher is not None:
            await self.publisher.close()

    async def _run(self) -> None:
        conn = self.conn
        cfg = self.config
        while True:
            try:
                await conn.wait_open()
                self.remote_id = conn.remote_container
                await self._open_control_link()
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried: the peer may come later
                log.warning("federation %s: control link not attached: %s", cfg.name, exc)
                await asyncio.sleep(max(conn.options.retry_interval, 0.5))
        assert self.publisher is not None
        self.publisher.origin = self.remote_id
        self.publisher.reset()
        conn.add_listener(self._reconnected)
        for receivers in (self.addresses, self.queues):
            if receivers is not None:
                receivers.enabled = True
        self._reevaluate()
        while True:
            await asyncio.sleep(RECONCILE_EVERY)
            for receivers in (self.addresses, self.queues):
                if receivers is not None:
                    receivers.reconcile()

    def _reconnected(self, conn: Any, state: Any) -> None:
        """A failover host is another broker: what came from it carries its id."""
        remote = getattr(conn, "remote_container", None)
        if getattr(state, "value", state) == "open" and remote and remote != self.remote_id:
            log.info("federation %s: now connected to node %s (was %s)", self.config.name, remote,
                     self.remote_id)
            self.remote_id = remote
            if self.publisher is not None:
                self.publisher.origin = remote
                self.publisher.reset()
            self._reevaluate()

    def _changed(self, receivers: Receivers) -> Any:
        def changed(key: str, origins: list[str | None]) -> None:
            # consumers the peer's own federation made here are not demand: they
            # would pull its messages back to it
            if any(o is None or o != self.remote_id for o in origins):
                receivers.want(key)
            else:
                receivers.unwant(key)
        return changed

    def _reevaluate(self) -> None:
        """Judge every key again (the peer's node id is known now, or changed)."""
        for demand, receivers in zip(self._demands, [r for r in (self.addresses, self.queues)
                                                     if r is not None], strict=True):
            changed = self._changed(receivers)
            for key, tokens in list(demand.counts.items()):
                changed(key, list(tokens.values()))

    # -- control link -----------------------------------------------------------------
    async def _open_control_link(self) -> None:
        cfg = self.config
        name = f"{wire.CONTROL_LINK_PREFIX}{cfg.name}:{self.node_id}:{_uuid()}"
        target = Terminus(kind=2, dynamic=True, capabilities=["temporary-topic"],
                          expiry_policy=pn.EXPIRE_WITH_LINK,
                          dynamic_node_properties={Symbol("lifetime-policy"): DELETE_ON_CLOSE})
        self.control = await self.conn.attach_sender(
            name, Terminus(kind=1), target,
            properties={wire.VERSION: 2, wire.CONFIGURATION: cfg.to_configuration_map(),
                        wire.FEDERATION_NAME: cfg.name},
            desired_capabilities=[wire.CONTROL_LINK])
        offered = getattr(self.control, "remote_offered_capabilities", None)
        if offered is not None and wire.CONTROL_LINK not in offered and \
                getattr(self.control, "remote_properties", None) is not None and \
                wire.VERSION not in (self.control.remote_properties or {}):
            await self.control.close()
            raise RuntimeError(f"the peer does not offer {wire.CONTROL_LINK}: it has no AMQP federation")
        for policy in cfg.remote_address_policies:
            await self._command(wire.ADD_ADDRESS_POLICY, policy.to_map())
        for qpolicy in cfg.remote_queue_policies:
            await self._command(wire.ADD_QUEUE_POLICY, qpolicy.to_map())

    async def _command(self, op: str, policy_map: dict[str, Any]) -> None:
        outcome = await self.control.send(policy_command(op, policy_map))
        if not outcome.accepted:
            raise RuntimeError(f"the peer did not accept {op} {policy_map.get('policy-name')!r}: "
                               f"{outcome.state} {outcome.condition or ''}")

    async def _durable_demand(self, demand: Demand) -> None:
        """Durable subscriptions on a matching address are demand, with or
        without a consumer (Artemis counts every queue bound to the address)."""
        feed = self.broker.change_feed.subscribe({SubscriptionCreated, SubscriptionDeleted},
                                                 name=f"federation {self.config.name} subscriptions")
        try:
            for sub in self.broker.management.durable_subscriptions():
                address = self._address_of(Destination.parse(sub.topic))
                if address is not None:
                    demand.count(address, sub.key, True, None)
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
        if any(p.selects(dest.name) for p in self.config.local_address_policies):
            return dest.name
        return None

    def _address_spec(self, address: str) -> ReceiverSpec:
        cfg = self.config
        policy = next(p for p in cfg.local_address_policies if p.selects(address))
        queue = wire.address_queue_name(cfg.name, policy.name, address, self.node_id)
        filters: dict[Any, Any] = {
            Symbol(wire.NO_LOCAL_KEY): Described(ULong(wire.NO_LOCAL_CODE), "NoLocalFilter{}")}
        if policy.max_hops > 0:
            filters[Symbol(wire.SELECTOR_KEY)] = Described(ULong(wire.SELECTOR_CODE),
                                                           max_hops_selector(policy.max_hops))
        source = Terminus(kind=1, address=f"{address}::{queue}", capabilities=["topic"],
                          expiry_policy=pn.EXPIRE_WITH_LINK, filter=filters)
        name = (f"federation-{cfg.name}-policy-{policy.name}-address-receiver-{address}-"
                f"{self.node_id}-{next(self._seq)}")
        props = {wire.ADDRESS_SOURCE_PROPERTIES: {
            "auto-delete": policy.auto_delete, "auto-delete-delay": Long(policy.auto_delete_delay),
            "auto-delete-msg-count": Long(policy.auto_delete_message_count)},
            wire.POLICY_NAME: policy.name}
        return ReceiverSpec(name, source, Terminus(kind=2, address=address),
                            Destination.topic(address), props, [wire.ADDRESS_RECEIVER], add_hops=True)

    # -- queue policies ---------------------------------------------------------------
    def _queue_key(self, consumer: Any) -> str | None:
        dest = consumer.destination
        if not dest.is_queue or dest.is_temporary:
            return None
        federated = is_federation_consumer(consumer)
        for p in self.config.local_queue_policies:
            if p.selects(dest.name, dest.name) and (p.include_federated or not federated):
                return dest.name
        return None

    def _queue_spec(self, queue: str) -> ReceiverSpec:
        cfg = self.config
        policy = next(p for p in cfg.local_queue_policies if p.selects(queue, queue))
        fqqn = f"{queue}::{queue}"
        source = Terminus(kind=1, address=fqqn, capabilities=["queue"],
                          expiry_policy=pn.EXPIRE_WITH_LINK)
        name = (f"federation-{cfg.name}-policy-{policy.name}-queue-receiver-{fqqn}-"
                f"{self.node_id}:{next(self._seq)}")
        props = {wire.PRIORITY: 0 + policy.priority_adjustment, wire.POLICY_NAME: policy.name}
        return ReceiverSpec(name, source, Terminus(kind=2, address=fqqn), Destination.queue(queue),
                            props, [wire.QUEUE_RECEIVER])

    # -- management -------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {
            "federation": self.config.name, "remote": self.remote_id,
            "address_receivers": self.addresses.open_keys() if self.addresses else [],
            "queue_receivers": self.queues.open_keys() if self.queues else [],
            "received": sum(r.received for r in (self.addresses, self.queues) if r is not None),
        }


def _uuid() -> str:
    import uuid

    return str(uuid.uuid4())
