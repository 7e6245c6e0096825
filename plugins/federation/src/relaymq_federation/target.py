"""The peer's side of AMQP federation: links another broker attaches here.

Entry points of ``relaymq.amqp_link_handlers`` (relaymq-amqp hands a link to
the handler named after a capability its attach desires):

* ``AMQ_FEDERATION_CONTROL_LINK`` -- `ControlLink`: the source's sender to a
  dynamic target. Answered with the target address = the link name,
  ``federation_version: 2`` and the capability offered; 10 credits. Its
  commands (``ADD_ADDRESS_POLICY``, ``ADD_QUEUE_POLICY``) are checked and
  applied (`remote.RemotePolicies`: receivers back over this connection); a
  bad one is rejected and the control link closed (only it).
* ``AMQ_FEDERATION_ADDRESS_RECEIVER`` -- `AddressSender`: a durable
  subscription on the address for the source (`address_queue`: it survives a
  dropped link, and goes when the source closes it), filtered by the max-hops
  selector and no-local (messages that came from that source).
* ``AMQ_FEDERATION_QUEUE_RECEIVER`` -- `QueueSender`: a consumer on an existing
  queue with the consumer priority of the link property ``priority``.
* ``AMQ_FEDERATION_EVENT_LINK`` -- `relaymq_federation.events.EventLink`.

Address and queue receivers are refused on a connection without a control link,
as Artemis does. Every refusal closes that link only.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from relaymq.errors import DestinationError, SecurityError, UnknownDelivery
from relaymq.model.destination import Destination
from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Terminus
from relaymq_amqp.links import apply_outcome, condition_for
from relaymq_amqp.mapping import from_kernel, with_delivery_count

from relaymq_federation import address_queue, wire
from relaymq_federation.config import AddressPolicy, QueuePolicy
from relaymq_federation.events import annotated_value, missing_address, missing_queue
from relaymq_federation.hops import hops_of, split_selector
from relaymq_federation.remote import RemotePolicies
from relaymq_federation.state import CONTROL_CREDIT, PRECONDITION, peer_state

log = logging.getLogger("relaymq.federation")

CONTROL_LOW_CREDIT = 3


def _filters(source: Terminus) -> tuple[str | None, bool]:
    selector = None
    no_local = False
    for key, value in (source.filter or {}).items():
        descriptor = getattr(value, "descriptor", None)
        inner = getattr(value, "value", value)
        if key == wire.SELECTOR_KEY or descriptor in (wire.SELECTOR_CODE,
                                                       "apache.org:selector-filter:string"):
            selector = str(inner) if inner is not None else None
        elif key == wire.NO_LOCAL_KEY or descriptor in (wire.NO_LOCAL_CODE, wire.NO_LOCAL_KEY):
            no_local = True
    return selector, no_local


class ControlLink:
    """``AMQ_FEDERATION_CONTROL_LINK``: the peer's commands."""

    address_prefixes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, link: Any) -> None:
        self.link = link
        self.state = peer_state(link.conn)
        #: the remote policies the peer sent, applied here (on the first one)
        self.remote: RemotePolicies | None = None
        #: the peer's events sender is attached (it announces what appears there)
        self.events = False

    def attach(self) -> None:
        link = self.link
        refusal = None
        if not link.peer_sends:
            refusal = ("amqp:invalid-field", "a federation control link is the peer's sender")
        elif not link.remote_target.dynamic:
            refusal = ("amqp:invalid-field", "a federation control link needs a dynamic target")
        elif self.state.control is not None:
            refusal = ("amqp:resource-locked", "this connection already has a federation control link")
        if refusal is not None:
            link.refuse(*refusal)
            self.state.release()
            return
        config = link.remote_properties.get(wire.CONFIGURATION)
        self.state.configuration = dict(config) if isinstance(config, dict) else {}
        self.state.control = self
        target = Terminus(kind=2, address=link.name, dynamic=True,
                          capabilities=list(link.remote_target.capabilities),
                          expiry_policy=link.remote_target.expiry_policy)
        link.open(target=target, properties={wire.VERSION: 2},
                  offered_capabilities=[wire.CONTROL_LINK], credit=CONTROL_CREDIT)
        log.info("federation control link %s from %s attached", link.name, link.remote_container)

    def on_delivery(self, delivery: Any) -> None:
        link = self.link
        data = link.receive(delivery)
        if data is None:
            return
        try:
            op, policy = self._command(data)
        except ValueError as exc:
            log.warning("federation control link %s: bad command: %s", link.name, exc)
            link.reject(delivery, "amqp:invalid-field", str(exc))
            link.close("amqp:invalid-field", f"bad federation command: {exc}")
            return
        if isinstance(policy, AddressPolicy):
            self.state.address_policies.append(policy)
        else:
            self.state.queue_policies.append(policy)
        log.info("federation %s: peer %s sent %s %r", link.name, link.remote_container, op, policy.name)
        link.accept(delivery)
        if self.remote is None:
            self.remote = RemotePolicies(link, self.state.configuration)
            self.remote.runner.set_events(self.events)
        self.remote.add(policy)
        if link.credit <= CONTROL_LOW_CREDIT:
            link.flow(CONTROL_CREDIT - link.credit)

    @staticmethod
    def _command(data: bytes) -> tuple[str, AddressPolicy | QueuePolicy]:
        ann, value = annotated_value(data, "command")
        op = ann.get(wire.OP_TYPE)
        if op == wire.ADD_ADDRESS_POLICY:
            return op, AddressPolicy.from_map(value)
        if op == wire.ADD_QUEUE_POLICY:
            return op, QueuePolicy.from_map(value)
        raise ValueError(f"unknown federation operation {op!r}")

    def on_flow(self) -> None:
        pass

    def peer_events(self, attached: bool) -> None:
        """The peer's events sender came (or went)."""
        self.events = attached
        if self.remote is not None:
            self.remote.runner.set_events(attached)

    def resource_added(self, address: str, queue: str | None) -> None:
        """The peer's events link: what a receiver of its remote policies was
        refused for exists now."""
        if self.remote is not None:
            self.remote.runner.resource_added(address, queue)

    def on_detach(self, closed: bool) -> None:
        if self.remote is not None:
            self.remote.stop()
            self.remote = None
        if self.state.control is self:
            self.state.control = None
        self.state.release()


class _FederationSender:
    """A consumer here whose messages go to the peer's federation receiver,
    each acknowledged when the peer settles it."""

    address_prefixes: ClassVar[tuple[str, ...]] = ()
    capability = ""

    def __init__(self, link: Any) -> None:
        self.link = link
        self.state = peer_state(link.conn)
        self.consumer: Any = None
        self.unsettled: dict[Any, int] = {}
        self.max_hops = 0
        self.no_local_origin: str | None = None
        #: (client id, name) of the durable subscription behind an address receiver
        self.durable: tuple[str, str] | None = None
        self._tag = 0

    def attach(self) -> None:
        link = self.link
        if link.peer_sends:
            link.refuse("amqp:invalid-field", f"a {self.capability} link receives from this broker")
            self.state.release()
            return
        if self.state.control is None:
            link.refuse(PRECONDITION, "no federation control link on this connection: attach "
                        f"{wire.CONTROL_LINK} before a {self.capability} link")
            self.state.release()
            return
        self.state.links.add(self)
        asyncio.get_running_loop().create_task(self._attach())

    def _destination(self) -> tuple[Destination, str | None, int]:
        raise NotImplementedError

    def _check_address(self, kconn: Any, dest: Destination) -> None:
        """As Artemis, an address receiver never makes an address the peer's
        federation may not create: refused as missing, announced when it appears."""
        try:
            kconn.authorize_create(dest)
        except SecurityError:
            missing_address(self.state, self.link.broker, dest.name)
            raise DestinationError(f"address {dest.name} does not exist") from None

    async def _attach(self) -> None:
        link = self.link
        try:
            dest, selector, priority = self._destination()
            kconn = await self.state.kernel(link)
            if dest.is_topic:
                self._check_address(kconn, dest)
            durable = self.durable
            if durable is not None:
                address_queue.attached(*durable)
                kconn.client_id = durable[0]
            consumer = await kconn.subscribe(dest, selector=selector, credit_mode=True,
                                             priority=priority, name=link.name,
                                             durable_name=durable[1] if durable else None,
                                             on_message=self._on_message)
        except Exception as exc:  # noqa: BLE001 - refuse this link only
            cond = condition_for(exc)
            log.info("federation link %s refused: %s", link.name, cond)
            if not link.closed:
                link.refuse(cond.name, cond.description or str(exc))
            self.state.links.discard(self)
            self.state.release()
            return
        if link.closed:
            kconn.close_consumer(consumer)
            return
        self.consumer = consumer
        consumer.on_drained = self._drained
        consumer.on_closed = self._kernel_closed
        source = link.remote_source
        link.open(source=Terminus(kind=1, address=source.address,
                                  capabilities=source.capabilities or ["topic" if dest.is_topic else "queue"],
                                  filter=source.filter, expiry_policy=source.expiry_policy),
                  offered_capabilities=[self.capability], snd_settle_mode=pn.SND_UNSETTLED,
                  rcv_settle_mode=pn.RCV_FIRST)
        self.on_flow()

    # -- kernel -> peer ---------------------------------------------------------------
    def _on_message(self, delivery: Any) -> None:
        msg = delivery.message
        data = msg.encoded
        if data is None or msg.encoding != "amqp":
            data = from_kernel(msg, delivery.delivery_count)
        elif delivery.delivery_count:
            data = with_delivery_count(data, delivery.delivery_count)
        if (self.no_local_origin is not None and msg.origin == self.no_local_origin) or \
                (self.max_hops and hops_of(data) >= self.max_hops):
            self._skip(delivery.id)
            return
        self._tag += 1
        self.unsettled[self.link.send(data, self._tag)] = delivery.id

    def _skip(self, did: int) -> None:
        """Not for this peer: done with it here (it is this link's own copy)."""
        c = self.consumer
        if c is None:
            return
        try:
            c.ack(did)
        except UnknownDelivery:
            pass
        asyncio.get_running_loop().call_soon(self.on_flow)

    def _drained(self) -> None:
        if not self.link.closed:
            pn.link_drained(self.link.pn)
            self.link.flush()

    def _kernel_closed(self, reason: str) -> None:
        self.consumer = None
        self.link.close("amqp:resource-deleted", reason)

    def on_flow(self) -> None:
        c = self.consumer
        if c is None or self.link.closed:
            return
        c.set_credit(self.link.credit, bool(pn.link_get_drain(self.link.pn)))

    # -- peer's outcomes --------------------------------------------------------------
    def on_delivery(self, d: Any) -> None:
        state = pn.delivery_remote_state(d)
        settled = pn.delivery_settled(d)
        if not settled and state in (0, pn.RECEIVED):
            return
        did = self.unsettled.pop(d, None)
        c = self.consumer
        if did is not None and c is not None:
            apply_outcome(c, did, d, state)
        pn.delivery_settle(d)
        self.link.flush()

    def on_detach(self, closed: bool) -> None:
        c = self.consumer
        self.consumer = None
        self.unsettled.clear()
        kconn = self.state.kconn
        if c is not None and kconn is not None and not kconn.closed:
            kconn.close_consumer(c)
        if c is not None and self.durable is not None:
            client_id, name = self.durable
            if closed:
                address_queue.link_closed(self.link.broker, client_id, name)
            else:
                address_queue.link_lost(self.link.broker, client_id, name,
                                        self.link.remote_properties)
        self.state.links.discard(self)
        self.state.release()


class AddressSender(_FederationSender):
    """``AMQ_FEDERATION_ADDRESS_RECEIVER``: the peer has demand for an address."""

    capability = wire.ADDRESS_RECEIVER

    def _destination(self) -> tuple[Destination, str | None, int]:
        source = self.link.remote_source
        if not source.address:
            raise ValueError("an address receiver needs a source address")
        address, _queue = wire.split_fqqn(source.address)
        selector, no_local = _filters(source)
        self.max_hops, rest = split_selector(selector)
        if no_local:
            self.no_local_origin = self.link.remote_container
        self.durable = (address_queue.client_id_for(self.link.remote_container),
                        address_queue.subscription_name(self.link.name, source.address))
        return Destination.topic(address), rest, 0


class QueueSender(_FederationSender):
    """``AMQ_FEDERATION_QUEUE_RECEIVER``: the peer has consumers for a queue."""

    capability = wire.QUEUE_RECEIVER

    def _destination(self) -> tuple[Destination, str | None, int]:
        source = self.link.remote_source
        if not source.address:
            raise ValueError("a queue receiver needs a source address")
        address, queue = wire.split_fqqn(source.address)
        name = queue or address
        dest = Destination.queue(name)
        if self.link.broker.management.queue(dest) is None:
            missing_queue(self.state, self.link.broker, address, name)
            raise DestinationError(f"queue {name} does not exist")
        if queue is not None and address != queue:
            raise DestinationError(f"queue {name} is not bound to address {address}")
        selector, _ = _filters(source)
        priority = self.link.remote_properties.get(wire.PRIORITY, 0)
        return dest, selector, int(priority) if isinstance(priority, int) else 0
