"""Broker-side AMQP links: a client's producer (our receiver) and consumer (our sender).

`ProducerLink` turns complete incoming deliveries into kernel messages and
queues them on the connection's send pipeline; the delivery is settled
`accepted` once ``conn.send`` returned (stored, for a durable message on a
persistent store), or `rejected` with an error condition.

`ConsumerLink` is a kernel consumer in credit mode: link credit is the
prefetch window, drain is honoured, and the peer's outcomes map to the kernel's
settlements (accepted=ack, released=release, modified failed=fail,
modified undeliverable-here=poison, rejected=reject, the DLQ).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final

from relaymq.dispatch.consumer import Consumer, Delivery, NackMode
from relaymq.errors import (
    DestinationError,
    MessageFormatError,
    ResourceLimitExceeded,
    SecurityError,
    SubscriptionInUse,
    TransactionError,
    UnknownDelivery,
)
from relaymq.model.destination import Destination, DestinationKind, InvalidDestination
from relaymq.selector import InvalidSelector

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition, DeliveryHandler, Engine, Terminus
from relaymq_amqp.mapping import (
    SCHEDULING_MARKERS,
    SELECTOR_FILTER_NAME,
    apply_scheduling,
    capabilities_for,
    destination_for,
    from_kernel,
    is_selector_filter,
    kind_from_capabilities,
    to_kernel,
    with_delivery_count,
)
from relaymq_amqp.options import AmqpOptions
from relaymq_amqp.scanner import DecodeError
from relaymq_amqp.transactions import CoordinatorLink
from relaymq_amqp.txstate import (
    TRANSACTIONAL_STATE,
    UNKNOWN_ID,
    kernel_txid,
    modified_flags,
    outcome_name,
    settle_transactional,
    state_fields,
    state_outcome,
)
from relaymq_amqp.types import Described, Symbol

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.broker.connection import ClientConnection
    from relaymq.model.message import Message

log = logging.getLogger("relaymq.amqp")

# Final: C globals in the compiled build (a plain module global is a dict lookup per use)
_update: Final = pn.delivery_update
_settle: Final = pn.delivery_settle
_is_settled: Final = pn.delivery_settled
_remote_state: Final = pn.delivery_remote_state
_pending: Final = pn.delivery_pending
_partial: Final = pn.delivery_partial
_advance: Final = pn.link_advance
_ACCEPTED: Final = pn.ACCEPTED
_SND_SETTLED: Final = pn.SND_SETTLED
_SND_UNSETTLED: Final = pn.SND_UNSETTLED

#: what an attach frame takes besides its link name, source address and selector: the
#: frame header, the other fields, the target and the capabilities
ATTACH_ROOM: Final = 512
NO_LOCAL_FILTER_CODE: Final = 0x0000468C00000003
NO_LOCAL_FILTER_NAME: Final = "apache.org:no-local-filter:list"


def condition_for(exc: BaseException) -> Condition:
    """The AMQP error condition for a kernel refusal."""
    if isinstance(exc, SecurityError):
        return Condition("amqp:unauthorized-access", str(exc))
    if isinstance(exc, ResourceLimitExceeded):
        return Condition("amqp:resource-limit-exceeded", str(exc))
    if isinstance(exc, SubscriptionInUse):
        return Condition("amqp:resource-locked", str(exc))
    if isinstance(exc, (InvalidDestination, InvalidSelector, DecodeError, MessageFormatError)):
        name = "amqp:decode-error" if isinstance(exc, DecodeError) else "amqp:invalid-field"
        return Condition(name, str(exc))
    if isinstance(exc, DestinationError):
        return Condition("amqp:not-found", str(exc))
    if isinstance(exc, TransactionError):
        return Condition("amqp:transaction:unknown-id", str(exc))
    return Condition("amqp:internal-error", f"{type(exc).__name__}: {exc}")


def apply_outcome(consumer: Consumer, did: int, d: Any, state: int) -> Awaitable[None] | None:
    """Apply the peer's outcome of a delivery it settled (or gave a terminal
    state) to the kernel consumer's delivery `did`: accepted (or settled without
    an outcome) = ack, released = release, modified = fail (delivery-failed),
    poison (undeliverable-here: it must not come back to this link) or release,
    rejected = reject (the DLQ). Returns the ack's store removal to watch, if
    any; a delivery the kernel no longer knows (already settled) is ignored.
    Shared by client consumer links and federation's links to a peer."""
    try:
        if state == _ACCEPTED or state == 0:
            return consumer.ack(did)
        if state == pn.MODIFIED:
            failed, undeliverable = pn.remote_modified_flags(d)
            if undeliverable:
                # ActiveMQ's poison ack (the redeliveryPlugin's policy, else the DLQ at once)
                consumer.nack(did, NackMode.POISON)
            elif failed:
                consumer.fail(did)
            else:
                consumer.release(did)
        elif state == pn.REJECTED:
            consumer.reject(did)
        else:  # released, or an outcome this broker does not know
            consumer.release(did)
    except UnknownDelivery:
        pass
    return None


class LinkHost:
    """What links need of the connection they belong to (`AmqpConnection` is the
    one implementation): its options, engine and kernel connection, its active
    transactions, and the calls that queue a send, flush output and watch store
    work. The connection extends this class instead of the links holding a
    reference to the connection module, so this module stays below it (and the
    compiled build still calls the connection natively)."""

    options: AmqpOptions
    broker: Broker
    engine: Engine | None
    kconn: ClientConnection | None
    #: active AMQP transactions of this connection -> the link that declared them
    transactions: dict[bytes, CoordinatorLink]
    #: output is already due to be flushed in this loop turn
    flush_scheduled: bool
    #: a transaction controller was attached at some point: transfers may then name
    #: transactions (before that, no transfer's state needs looking at)
    transactional: bool
    #: every disposition the events being handled now come from was the peer
    #: receiver's settled `accepted` (the frame guard checked each one in place):
    #: a delivery event on a consumer link then needs no question to proton about
    #: its state (`FrameGuard.accepts_only`)
    accepts_only: bool
    #: deliveries the consumer links sent and the peer has not settled -> (the link,
    #: the kernel's delivery id): `Engine.pump` hands the peer's disposition of one
    #: straight to its link (no question to proton about the delivery's link).
    #: Exact at all times: an entry goes when its delivery is settled or its link
    #: detaches, before proton may free the delivery (and reuse its address)
    sent_deliveries: dict[Any, tuple[DeliveryHandler, int]]

    def submit(self, message: Message, link: ProducerLink, delivery: Any,
               txn: bytes | None = None) -> None:
        """Queue a received message for the kernel (in arrival order)."""
        raise NotImplementedError

    def want_flush(self) -> None:
        """Write what the engine has for the peer, once this loop turn ends."""
        raise NotImplementedError

    def link_closed(self, link: Link) -> None:
        raise NotImplementedError

    def spawn(self, coro: Any) -> None:
        """Run a coroutine for this connection (cancelled when it closes)."""
        raise NotImplementedError

    def watch(self, fut: Awaitable[None]) -> None:
        """Log a failed store write of an acknowledgement."""
        raise NotImplementedError

    def acks_due(self, link: ConsumerLink) -> None:
        """`link` holds accepted outcomes for the kernel: call its `flush_acks`
        once the events being handled now are done (before anything else runs)."""
        raise NotImplementedError

    def unsubscribe_later(self, name: str) -> None:
        """Remove the durable subscription `name` once its link is gone."""
        raise NotImplementedError


class Link(DeliveryHandler):
    """What both directions share: the proton link, its connection, its name."""

    def __init__(self, conn: LinkHost, link: Any) -> None:
        self.conn = conn
        self.link = link
        self.name = pn.link_name(link)
        self.session = pn.link_session(link)
        self.closed = False

    def refuse(self, condition: Condition, source: bool) -> None:
        """Refuse an attach the AMQP way: answer with a null terminus, then close."""
        if source:
            pn.set_source(self.link, None)
            pn.set_target(self.link, pn.remote_target(self.link))
        else:
            pn.set_target(self.link, None)
            pn.set_source(self.link, pn.remote_source(self.link))
        pn.link_open(self.link)
        self.close(condition)

    def _check_echo_fits(self, address: str, selector: str | None) -> None:
        """The attach that answers this one repeats its terminus (address and
        filter) and cannot be split across frames: refuse a terminus too large for
        the peer's max-frame-size, rather than send a frame the peer must fail
        its whole connection on."""
        engine = self.conn.engine
        limit = engine.remote_max_frame_size if engine is not None else 0
        size = ATTACH_ROOM + len(self.name.encode()) + len(address.encode()) \
            + (len(selector.encode()) if selector else 0)
        if 0 < limit < size:
            detail = (f"the answering attach would take about {size} bytes, and this "
                      f"connection's max-frame-size is {limit}")
            what = "selector" if selector and len(selector) > len(address) else "address"
            raise InvalidDestination(f"the {what} is too long: {detail}")

    def close(self, condition: Condition | None = None, closed: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        self.detached()
        if closed:
            pn.link_close(self.link, condition)
        else:
            pn.link_detach(self.link, condition)
        self.conn.link_closed(self)

    def detached(self) -> None:
        """Release kernel resources (overridden)."""

    def on_delivery(self, delivery: Any) -> None: ...

    def on_flow(self) -> None: ...

    def on_remote_close(self, closed: bool) -> None:
        cond = pn.link_remote_condition(self.link)
        if cond is not None:
            log.debug("link %s detached by the peer: %s", self.name, cond)
        self.close(None, closed)


# ---------------------------------------------------------------------------
# client producer -> broker
# ---------------------------------------------------------------------------


class ProducerLink(Link):
    """The broker's receiver for one client producer."""

    def __init__(self, conn: LinkHost, link: Any) -> None:
        super().__init__(conn, link)
        self.destination: Destination | None = None
        self.window = conn.options.producer_credit
        self.low_water = self.window // 2
        self.credit = 0  # what the producer may still send (we count it: no C call per message)
        self.inflight = 0  # received, not yet through conn.send
        self._partial: list[bytes] = []
        self._partial_size = 0
        assert conn.engine is not None
        self._engine: Engine = conn.engine
        self.max_message_size = conn.options.max_message_size
        #: with `schedulerSupport`, messages are looked at for scheduling properties
        self.scheduling = conn.broker.scheduler is not None
        self._producer: Destination | None = None  # counted with kconn.add_producer
        #: the producer's sender settle mode: only with "mixed" does each transfer
        #: say whether it is settled (one engine call per message saved otherwise)
        self.snd_settle_mode = pn.SND_MIXED

    def attach(self) -> None:
        target = pn.remote_target(self.link)
        kconn = self.conn.kconn
        assert kconn is not None
        try:
            if target.dynamic:
                kind = kind_from_capabilities(target.capabilities, DestinationKind.TEMP_QUEUE)
                kind = DestinationKind.TEMP_TOPIC if kind in (DestinationKind.TOPIC,
                                                              DestinationKind.TEMP_TOPIC) \
                    else DestinationKind.TEMP_QUEUE
                self.destination = kconn.create_temporary(kind)
                target.address = self.destination.key
                target.capabilities = capabilities_for(self.destination)
            elif target.address:
                self._check_echo_fits(target.address, None)
                self.destination = destination_for(target.address, target.capabilities)
                self._check_exists(self.destination)
                # a name the store cannot hold is refused now, not at the first send
                kconn.broker.region.check_name(self.destination)
                kconn.authorize("write", self.destination)
        except Exception as exc:  # noqa: BLE001 - every refusal becomes a condition
            self.refuse(condition_for(exc), source=False)
            return
        pn.set_target(self.link, target)
        pn.set_source(self.link, pn.remote_source(self.link))
        # The client's sender settle mode is honoured as asked (settled, unsettled or
        # mixed) and stated so in our attach (AMQP 1.0 §2.6.3); we settle first.
        mode = self.snd_settle_mode = pn.link_remote_snd_settle_mode(self.link)
        pn.link_open(self.link, snd_settle_mode=mode,
                     rcv_settle_mode=pn.RCV_FIRST, max_message_size=self.max_message_size)
        pn.link_flow(self.link, self.window)
        self.credit = self.window
        if self.destination is not None:  # a named producer (management, advisories)
            self._producer = self.destination
            self.conn.spawn(kconn.add_producer(self.destination))

    def detached(self) -> None:
        dest, self._producer = self._producer, None
        kconn = self.conn.kconn
        if dest is not None and kconn is not None and not kconn.closed:
            self.conn.spawn(kconn.remove_producer(dest))

    def _check_exists(self, dest: Destination) -> None:
        """A temporary destination exists only while its connection does: a producer
        link to one that is gone is refused at attach (`amqp:not-found`); each send,
        on any link, is checked again by the kernel (`ClientConnection.submit`)."""
        kconn = self.conn.kconn
        assert kconn is not None
        if dest.is_temporary and dest not in kconn.temporary \
                and kconn.broker.temporary_owner(dest) is None:
            raise DestinationError(f"temporary destination {dest} does not exist")

    def on_delivery(self, d: Any) -> None:
        if self.closed:
            return
        link = self.link
        n = _pending(d)
        if _partial(d):
            if n:
                self._partial.append(self._engine.recv(link, n))
                self._partial_size += n
                if self.max_message_size and self._partial_size > self.max_message_size:
                    self._too_large()
            return
        if n == 0:
            if pn.delivery_aborted(d):
                self._partial.clear()
                self._partial_size = 0
                pn.link_advance(link)
                pn.delivery_settle(d)
                self.credit -= 1
                self._top_up()
            return  # otherwise an update of a delivery we already took
        data = self._engine.recv(link, n)
        if self._partial:
            self._partial.append(data)
            data = b"".join(self._partial)
            self._partial.clear()
            self._partial_size = 0
        if self.max_message_size and len(data) > self.max_message_size:
            self._too_large()
            return
        mode = self.snd_settle_mode
        settled = mode == _SND_SETTLED or (mode != _SND_UNSETTLED and bool(_is_settled(d)))
        _advance(link)
        self.credit -= 1
        txn = None
        try:
            if self.conn.transactional and _remote_state(d) == TRANSACTIONAL_STATE:
                txn = self._transaction(d)
            message, sections = to_kernel(data, self.destination)
            if message.user_id is not None:
                self._check_user_id(message.user_id)
            if self.scheduling and (SCHEDULING_MARKERS[0] in data or SCHEDULING_MARKERS[1] in data):
                apply_scheduling(message, data, sections)
        except Exception as exc:  # noqa: BLE001 - a bad message is refused, not fatal
            if txn is None and isinstance(exc, TransactionError) and settled:
                # a pre-settled transfer in a transaction that is not active: it cannot
                # be rejected, so the producer learns it from the link's close
                self.close(condition_for(exc))
                return
            self._refused(None if settled else d, condition_for(exc))
            return
        self.inflight += 1
        self.conn.submit(message, self, None if settled else d, txn)

    def _transaction(self, d: Any) -> bytes:
        """The active transaction a transactional transfer names."""
        txn, _ = state_fields(d)
        if txn not in self.conn.transactions:
            raise TransactionError(f"transaction {txn!r} is not active on this connection "
                                   "(never declared, or already discharged)")
        return txn

    def _check_user_id(self, user_id: str) -> None:
        """With populateJMSXUserID a transfer's user-id must be the sender's own user:
        its bytes go to AMQP consumers as they are, so a forged one is refused."""
        kconn = self.conn.kconn
        if kconn is not None and kconn.populate_user_id and user_id != kconn.user:
            raise SecurityError(f"user-id {user_id!r} is not the authenticated user "
                                f"{kconn.user!r} (populateJMSXUserID)")

    def _too_large(self) -> None:
        self.close(Condition("amqp:link:message-size-exceeded",
                             f"messages on this link may have at most {self.max_message_size} bytes"))

    def sent(self, d: Any, error: BaseException | None) -> None:
        """Called by the connection's send pipeline when ``conn.send`` finished."""
        self.inflight -= 1
        if error is None:
            if d is not None and not self.closed:
                _update(d, _ACCEPTED)
                _settle(d)
        elif d is not None and not self.closed:
            pn.settle_with(d, pn.REJECTED, condition_for(error))
        elif self.destination is None and not self.closed:
            # A pre-settled message to the anonymous relay: one message's `to` is
            # refused, the relay itself stays usable for other destinations.
            log.info("pre-settled message on relay link %s refused: %s", self.name, error)
        elif not self.closed:
            # A pre-settled message cannot be rejected: tell the producer by closing the link.
            log.info("pre-settled message on link %s refused: %s", self.name, error)
            self.close(condition_for(error))
            return
        if self.credit + self.inflight <= self.low_water:
            self._top_up()

    def _refused(self, d: Any, condition: Condition) -> None:
        if d is not None:
            pn.settle_with(d, pn.REJECTED, condition)
        else:
            log.info("dropping a pre-settled message on link %s: %s", self.name, condition)
        self._top_up()

    def _top_up(self) -> None:
        """Grant credit back up to the window, counting messages still being sent
        (so a producer waiting on flow control gets no more credit)."""
        if self.closed:
            return
        grant = self.window - self.credit - self.inflight
        if grant > 0 and self.credit + self.inflight <= self.low_water:
            pn.link_flow(self.link, grant)
            self.credit += grant


# ---------------------------------------------------------------------------
# broker -> client consumer
# ---------------------------------------------------------------------------


def _selector_from(filters: dict[str, Any]) -> tuple[str | None, bool, dict[Any, Any]]:
    """(selector, no_local, the filters we honour) from a source's filter map."""
    selector = None
    no_local = False
    accepted: dict[Any, Any] = {}
    for key, value in filters.items():
        descriptor = value.descriptor if isinstance(value, Described) else None
        inner = value.value if isinstance(value, Described) else value
        if is_selector_filter(key, value):
            selector = str(inner) if inner is not None else None
            accepted[Symbol(key)] = value
        elif descriptor in (NO_LOCAL_FILTER_CODE, NO_LOCAL_FILTER_NAME) or key == "no-local":
            no_local = True
            accepted[Symbol(key)] = value
    return selector, no_local, accepted


class ConsumerLink(Link):
    """The broker's sender for one client consumer (or browser)."""

    def __init__(self, conn: LinkHost, link: Any) -> None:
        super().__init__(conn, link)
        self.consumer: Consumer | None = None
        #: the connection's map of unsettled deliveries (`LinkHost.sent_deliveries`): this
        #: link's entries are its unsettled deliveries -> kernel delivery ids
        self._sent = conn.sent_deliveries
        #: delivery ids the peer accepted in the events being handled now: the
        #: kernel acknowledges them together (`flush_acks`), one queue call
        self._acks: list[int] = []
        self.presettled = False
        self.browser = False
        self.durable_name: str | None = None
        self._tag = 0
        assert conn.engine is not None
        self._engine: Engine = conn.engine

    async def attach(self) -> None:
        if self.closed:
            # the peer detached before this task ran: its link is freed already
            # (an attach and its detach in one read), so nothing may touch it
            return
        kconn = self.conn.kconn
        assert kconn is not None
        link = self.link
        source = pn.remote_source(link)
        try:
            dest, selector, no_local, accepted = self._resolve(source)
            self.presettled = pn.link_remote_snd_settle_mode(link) == pn.SND_SETTLED
            self.browser = source.distribution_mode == pn.DIST_MODE_COPY and dest.is_queue
            consumer = await kconn.subscribe(
                dest, selector=selector, credit_mode=True, browser=self.browser,
                durable_name=self.durable_name, no_local=no_local, name=self.name,
                on_message=self._on_message,
            )
        except Exception as exc:  # noqa: BLE001 - every refusal becomes a condition
            if not self.closed:
                self.refuse(condition_for(exc), source=True)
            return
        if self.closed:  # the peer detached while we subscribed
            kconn.close_consumer(consumer)
            return
        self.consumer = consumer
        consumer.on_drained = self._on_drained
        consumer.on_closed = self._on_kernel_closed
        source.address = source.address or dest.key
        source.filter = accepted
        if not source.capabilities or source.dynamic:
            source.capabilities = capabilities_for(dest)
        pn.set_source(link, source)
        pn.set_target(link, pn.remote_target(link))
        pn.link_open(link, snd_settle_mode=pn.SND_SETTLED if self.presettled else pn.SND_UNSETTLED,
                     rcv_settle_mode=pn.RCV_FIRST)
        self.on_flow()
        self.conn.want_flush()

    def _resolve(self, source: Terminus) -> tuple[Destination, str | None, bool, dict[Any, Any]]:
        kconn = self.conn.kconn
        assert kconn is not None
        selector, no_local, accepted = _selector_from(source.filter)
        if source.dynamic:
            kind = kind_from_capabilities(source.capabilities, DestinationKind.TEMP_QUEUE)
            kind = DestinationKind.TEMP_TOPIC if kind in (DestinationKind.TOPIC,
                                                          DestinationKind.TEMP_TOPIC) \
                else DestinationKind.TEMP_QUEUE
            dest = kconn.create_temporary(kind)
            source.address = dest.key
            return dest, selector, no_local, accepted
        if not source.address:
            # Qpid JMS looks an existing durable subscription up by link name alone
            # (to resume it, or to unsubscribe); reply with what it subscribed to.
            sub = None
            if kconn.client_id:
                sub = kconn.broker.management.durable_subscription(kconn.client_id, self.name)
            if sub is None:
                raise DestinationError(f"no durable subscription named {self.name!r}")
            dest = Destination.parse(sub.topic)
            self.durable_name = self.name
            selector = sub.selector
            if selector:
                accepted[Symbol("jms-selector")] = Described(Symbol(SELECTOR_FILTER_NAME), selector)
            source.address = dest.key
            source.durable = pn.UNSETTLED_STATE
            source.expiry_policy = pn.EXPIRE_NEVER
            return dest, selector, sub.no_local or no_local, accepted
        self._check_echo_fits(source.address, selector)
        dest = destination_for(source.address, source.capabilities)
        if dest.is_topic and source.durable and source.expiry_policy == pn.EXPIRE_NEVER:
            self.durable_name = self.name
        return dest, selector, no_local, accepted

    # -- kernel -> wire ------------------------------------------------------------
    def _on_message(self, delivery: Delivery) -> None:
        msg = delivery.message
        data = msg.encoded
        try:
            if data is None or msg.encoding != "amqp":
                data = from_kernel(msg, delivery.delivery_count)
            elif delivery.delivery_count:
                data = with_delivery_count(data, delivery.delivery_count)
        except Exception as exc:  # noqa: BLE001 - only this delivery fails
            self._unsendable(delivery, exc)
            return
        if self.presettled:
            d = pn.send(self.link, b"", data)
            _settle(d)
            if not self.browser and self.consumer is not None:
                self._settle(self.consumer.ack, delivery.id)
        else:
            tag = self._tag = self._tag + 1
            self._sent[self._engine.send(self.link, tag, data)] = (self, delivery.id)
        conn = self.conn
        if not conn.flush_scheduled:
            conn.want_flush()

    def _unsendable(self, delivery: Delivery, exc: Exception) -> None:
        """`delivery`'s message cannot be encoded for AMQP (a field another protocol
        gave it has no AMQP form). Like ActiveMQ's AMQP transport, the broker
        poison-acks it (the redeliveryPlugin's policy, else the dead-letter queue) once
        the dispatch that handed it over is done; nothing went out on the link, so
        the consumer's credit is taken from the link again, and the deliveries
        around it go out as usual."""
        log.warning("message %s on %s cannot be sent to AMQP consumer link %s (%s: %s); "
                    "it is poison-acked (dead-letter queue)", delivery.message.message_id,
                    delivery.message.destination, self.name, type(exc).__name__, exc)
        if self.browser:
            return  # a browser's copy: nothing to settle
        did = delivery.id

        def poison() -> None:
            consumer = self.consumer
            if consumer is None:
                return  # the link closed meanwhile: the kernel released its deliveries
            try:
                consumer.nack(did, NackMode.POISON)
            except UnknownDelivery:
                pass  # settled meanwhile (the consumer closed)
            self.on_flow()

        asyncio.get_running_loop().call_soon(poison)

    def _on_drained(self) -> None:
        if not self.closed:
            pn.link_drained(self.link)
            self.conn.want_flush()

    def _on_kernel_closed(self, reason: str) -> None:
        self.consumer = None
        self.close(Condition("amqp:resource-deleted", reason))
        self.conn.want_flush()

    def on_flow(self) -> None:
        c = self.consumer
        if c is None or self.closed:
            return
        c.set_credit(pn.link_credit(self.link), bool(pn.link_get_drain(self.link)))

    # -- wire -> kernel ---------------------------------------------------------------
    def on_delivery(self, d: Any) -> None:
        """An event on a delivery this link does not hold unsettled (any more)."""
        self.on_disposition(d, -1)

    def on_disposition(self, d: Any, did: int) -> None:
        """The peer's disposition of `d`, the kernel's delivery `did` (-1: a delivery
        without an entry in `_sent`; `Engine.pump` finds the entry)."""
        if self.conn.accepts_only:
            # The peer settled it `accepted`: an event on a delivery we sent comes
            # only from a disposition, and each of those was checked to say so.
            self._accepted(d, did)
            _settle(d)
            return
        state = _remote_state(d)
        if state == _ACCEPTED:  # the common case, kept short
            self._accepted(d, did)
            if not _is_settled(d):
                _update(d, state)
            _settle(d)
            return
        if self._acks:
            self.flush_acks()  # outcomes reach the kernel in the order they came
        if state == TRANSACTIONAL_STATE:
            self._transactional(d, did)
            return
        settled = _is_settled(d)
        if not settled and (state == 0 or state == pn.RECEIVED):
            return
        self._forget(d, did)
        c = self.consumer
        if did < 0 or c is None or self.browser:
            _settle(d)
            return
        fut = apply_outcome(c, did, d, state)
        if fut is not None:
            self.conn.watch(fut)
        if not settled:
            _update(d, state)
        _settle(d)

    def _accepted(self, d: Any, did: int) -> None:
        """Queue the acknowledgement of an accepted delivery (flushed to the kernel
        in one call per read: `flush_acks`)."""
        if did < 0:
            return
        del self._sent[d]
        if self.consumer is not None and not self.browser:
            acks = self._acks
            if not acks:
                self.conn.acks_due(self)
            acks.append(did)

    def _transactional(self, d: Any, did: int) -> None:
        """A disposition in a transaction. Its outcome takes effect at discharge
        (AMQP 1.0 §4.4.2): `accepted` acknowledges the delivery at commit;
        `released`, `modified` and `rejected` are applied at commit as they would
        be outside a transaction. A rollback discards them all: the delivery goes
        back to its queue as redelivered."""
        kconn = self.conn.kconn
        try:
            txn, outcome = state_outcome(d)
            if txn not in self.conn.transactions or kconn is None:
                raise TransactionError(f"transaction {txn!r} is not active on this connection "
                                       "(never declared, or already discharged)")
        except TransactionError as exc:
            # The delivery stays unacknowledged: it returns to its queue with the link.
            self.close(Condition(UNKNOWN_ID, str(exc)))
            self.conn.want_flush()
            return
        if outcome is None:
            return  # no outcome yet
        name = outcome_name(outcome)
        self._forget(d, did)
        c = self.consumer
        if did >= 0 and c is not None and not self.browser:
            tx = kconn.transaction(kernel_txid(txn))
            try:
                if name == "accepted":
                    c.ack(did, tx)
                elif name == "rejected":
                    c.nack(did, NackMode.REJECT, tx)
                elif name == "modified":
                    failed, undeliverable = modified_flags(outcome)
                    mode = NackMode.POISON if undeliverable else \
                        NackMode.FAILED if failed else NackMode.RELEASE
                    c.nack(did, mode, tx)
                else:  # released, or an outcome this broker does not know
                    c.nack(did, NackMode.RELEASE, tx)
            except UnknownDelivery:
                pass
        if _is_settled(d):
            _settle(d)
        else:
            settle_transactional(d, txn, outcome)

    def _forget(self, d: Any, did: int) -> None:
        """`d` (the kernel's delivery `did`, -1 when it has no entry) is about to be
        settled: its entry in `_sent` goes. (The outcomes flushed to the kernel just
        before may have closed the link, and its entries with it.)"""
        if did >= 0:
            self._sent.pop(d, None)

    def flush_acks(self) -> None:
        """Acknowledge the deliveries accepted since the last call, in one kernel call."""
        acks = self._acks
        if not acks:
            return
        self._acks = []
        c = self.consumer
        if c is None or self.browser:
            return
        fut = c.ack_many(acks)
        if fut is not None:
            self.conn.watch(fut)

    def _settle(self, ack: Any, did: int) -> None:
        try:
            fut = ack(did)
        except UnknownDelivery:
            return
        if fut is not None:
            self.conn.watch(fut)

    def detached(self) -> None:
        self.flush_acks()  # accepted before the detach: acknowledged, not returned
        c = self.consumer
        self.consumer = None
        sent = self._sent
        if sent:
            # its unsettled deliveries return to the queue with the kernel consumer and
            # are freed by proton with the link: no entry may outlive them
            for d in [d for d, entry in sent.items() if entry[0] is self]:
                del sent[d]
        kconn = self.conn.kconn
        if c is not None and kconn is not None:
            kconn.close_consumer(c)

    def on_remote_close(self, closed: bool) -> None:
        durable = self.durable_name
        super().on_remote_close(closed)
        if closed and durable is not None:
            self.conn.unsubscribe_later(durable)
